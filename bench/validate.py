"""Offline commands: `hyperpod-cdk --help`, `validate` on every example (the largest last) and `schema`, against
a bare `python -c pass` in the same run (bench/timing.py).

Run in the repo root: ``.venv/bin/python bench/validate.py`` (``make bench`` runs it too). Targets (issue #21):
``--help`` at most 3x the bare interpreter, ``validate`` of the largest example at most 8x.
"""

from __future__ import annotations

import argparse

from timing import ROOT, cli, measure, report

LARGEST = max((ROOT / "examples").glob("*.yaml"), key=lambda path: path.stat().st_size)


def commands() -> dict[str, list[str]]:
    largest = str(LARGEST.relative_to(ROOT))
    return {
        "hyperpod-cdk --help": [cli(), "--help"],
        "validate examples/gpu-cluster.yaml": [cli(), "validate", "examples/gpu-cluster.yaml"],
        "validate --region us-west-2 examples/trn1-cluster.yaml": [
            cli(),
            "validate",
            "--region",
            "us-west-2",
            "examples/trn1-cluster.yaml",
        ],
        f"validate {largest} (the largest example)": [cli(), "validate", largest],
        "schema": [cli(), "schema"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    timed = commands()
    targets = {"hyperpod-cdk --help": 3.0, next(name for name in timed if "(the largest" in name): 8.0}
    command_line = f".venv/bin/python bench/validate.py --runs {args.runs}"
    print(report(measure(timed, args.runs), targets, command_line))


if __name__ == "__main__":
    main()
