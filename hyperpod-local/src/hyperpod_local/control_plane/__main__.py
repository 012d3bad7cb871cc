"""``python -m hyperpod_local.control_plane --workdir W``: the control plane process of the local cluster in W
(:func:`hyperpod_local.control_plane.local.start` starts it)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hyperpod_local.control_plane.local import serve


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m hyperpod_local.control_plane")
    parser.add_argument("--workdir", required=True, type=Path)
    serve(parser.parse_args(argv).workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
