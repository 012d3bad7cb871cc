"""`hyperpod-cdk plan` benchmark: the largest example against its deployed stack and cluster, target under 3 s.

Run in the repo root: ``.venv/bin/python bench/plan.py`` (needs the test extra: moto, and hyperpod-local's
control plane). The largest example is production-cluster (19 instances in 3 groups, the most of any example). Its
stack is created in a moto server on 127.0.0.1 (CloudFormation, S3: the snapshot template cut to what plan reads
and the parameters file, tests/plan_support.py) and its cluster served by the emulated control plane
(SageMaker DescribeCluster, ListClusterNodes), both over real HTTP. The config deployed is the example with the GPU
group's count raised (one in-place change to report). Each run is a fresh process
(``python -m hyperpod_cdk.cli plan FILE``, so the measure includes the interpreter and imports), interleaved with
``python -c pass``. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import boto3

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from plan_support import cluster_groups, control_plane, deploy_stack, snapshot  # noqa: E402
from timing import BARE, measure, moto_env  # noqa: E402

EXAMPLE = "production-cluster"
TARGET_S = 3.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    session = boto3.session.Session(region_name="us-west-2", aws_access_key_id="testing", aws_secret_access_key="t")
    config = (ROOT / "examples" / f"{EXAMPLE}.yaml").read_text()
    assert "    count: 16\n" in config
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "hyperpod-local" / "src")])
    with (
        tempfile.TemporaryDirectory() as work,
        moto_env(PYTHONPATH=path, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing") as env,
    ):
        new = Path(work) / f"{EXAMPLE}.yaml"
        new.write_text(config.replace("    count: 16\n", "    count: 20\n", 1))
        for name, value in env.items():
            if name.startswith("AWS_"):
                os.environ[name] = value
        deploy_stack(session, EXAMPLE)
        _, template, _ = snapshot(EXAMPLE)
        with control_plane("production", cluster_groups(template)) as url:
            env["AWS_ENDPOINT_URL_SAGEMAKER"] = url
            command = [sys.executable, "-m", "hyperpod_cdk.cli", "plan", str(new), "--json"]
            times = measure({f"plan {EXAMPLE} --json": command}, args.runs, env)
    print("| command | median s [min, max] | target |\n|---|---:|---:|")
    for name, samples in times.items():
        target = (
            ""
            if name == BARE
            else f"< {TARGET_S:g} s ({'met' if statistics.median(samples) < TARGET_S else 'NOT met'})"
        )
        print(f"| `{name}` | {statistics.median(samples):.2f} [{min(samples):.2f}, {max(samples):.2f}] | {target} |")
    print(
        f"\n{args.runs} runs each, fresh processes, interleaved; nproc {os.cpu_count()}, "
        f"load {os.getloadavg()[0]:.2f}; command: `.venv/bin/python bench/plan.py --runs {args.runs}`"
    )


if __name__ == "__main__":
    main()
