"""``python3 -m training_runtime.health``: the health program (see :mod:`training_runtime.health.cli`)."""

import sys

from training_runtime.health.cli import main

sys.exit(main(sys.argv[1:]))
