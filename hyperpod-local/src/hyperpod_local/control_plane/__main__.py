"""``python -m hyperpod_local.control_plane --workdir W``: the control plane process of the local cluster in W, by
hand (:func:`hyperpod_local.control_plane.local.start` starts it through :mod:`hyperpod_local.processes`)."""

from __future__ import annotations

import sys

from hyperpod_local.processes import main

if __name__ == "__main__":
    sys.exit(main(["hyperpod_local.control_plane", *sys.argv[1:]]))
