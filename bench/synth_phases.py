"""Where a synth's time goes: import aws_cdk, import the stack's modules, build the constructs, synthesize.

Run in the repo root: ``.venv/bin/python bench/synth_phases.py [--runs 7]``. Each run is a fresh process (the
default app, then a bare one-bucket app, interleaved) with CDK's validator off, as in bench/synth.py; the
child times its own phases with ``time.perf_counter`` and, for the default app, each top-level construct.
Prints a Markdown table of medians. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import gc, json, sys, time
gc.disable()
t0 = time.perf_counter()
import aws_cdk as cdk
t1 = time.perf_counter()
parts = {}
if sys.argv[1] == "default":
    from hyperpod_cdk import ClusterConfig
    import hyperpod_cdk.constructs as constructs
    from hyperpod_cdk.stacks import TrainingClusterStack
    t2 = time.perf_counter()
    for name in ("ClusterNetwork", "LustreStorage", "LifecycleScripts", "HyperPodCluster"):
        cls = getattr(constructs, name)
        def timed(self, *a, _init=cls.__init__, _name=name, **k):
            start = time.perf_counter()
            _init(self, *a, **k)
            parts[_name] = parts.get(_name, 0.0) + time.perf_counter() - start
        cls.__init__ = timed
    app = cdk.App()
    TrainingClusterStack(app, "default", config=ClusterConfig())
else:
    from aws_cdk import aws_s3 as s3
    t2 = time.perf_counter()
    app = cdk.App()
    s3.Bucket(cdk.Stack(app, "Bare"), "Bucket")
t3 = time.perf_counter()
app.synth()
t4 = time.perf_counter()
print(json.dumps({"import aws_cdk": t1 - t0, "import the stack's modules": t2 - t1, "build constructs": t3 - t2,
                  "synthesize": t4 - t3, "total in process": t4 - t0, **{"  " + k: v for k, v in parts.items()}}))
"""


def run(kind: str) -> dict[str, float]:
    env = dict(os.environ, CDK_VALIDATION="false", JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20")
    with tempfile.TemporaryDirectory() as outdir:
        env["CDK_OUTDIR"] = outdir
        result = subprocess.run(
            [sys.executable, "-c", CHILD, kind], env=env, cwd=ROOT, capture_output=True, text=True, check=True
        )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    run("default"), run("bare")  # warm-up: package caches, .pyc files
    samples: dict[str, list[dict[str, float]]] = {"default": [], "bare": []}
    for _ in range(args.runs):
        for kind in samples:
            samples[kind].append(run(kind))
    phases = list(samples["default"][0])
    print(f"| Phase (median of {args.runs}) | Default app s | Bare app s | Default - bare s |")
    print("| --- | --: | --: | --: |")
    for phase in phases:
        default = statistics.median(s[phase] for s in samples["default"])
        bare_values = [s[phase] for s in samples["bare"] if phase in s]
        bare = statistics.median(bare_values) if bare_values else None
        print(
            f"| {phase} | {default:.3f} | {'' if bare is None else f'{bare:.3f}'} | "
            f"{'' if bare is None else f'{default - bare:+.3f}'} |"
        )


if __name__ == "__main__":
    main()
