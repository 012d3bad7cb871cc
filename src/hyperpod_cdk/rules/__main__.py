"""``python -m hyperpod_cdk.rules``: print docs/rules.md, the rules reference, from the registry."""

from __future__ import annotations

import sys

from hyperpod_cdk.preflight import load
from hyperpod_cdk.rules.reference import reference

if __name__ == "__main__":
    load()  # the reference lists the online rules too
    sys.stdout.write(reference())
