"""Operator CLI startup: `hyperpod-cdk --help`, `status --help` and `status CLUSTER --json` vs `python -c pass`.

Run in the repo root: ``.venv/bin/python bench/cli_startup.py`` (needs the test extra: moto). The script starts a
moto server on 127.0.0.1 with one cluster, so `status` makes its real calls (DescribeCluster, ListClusterNodes)
over HTTP. Each command runs as a fresh process, alternating, ``--runs`` times; the report gives medians and the
ratio to the bare interpreter measured in the same run. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import boto3
from moto.server import ThreadedMotoServer

ROOT = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).parent / "hyperpod-cdk")
IMPORTS = "import boto3, botocore.config, rich.console, rich.table"


def commands() -> dict[str, list[str]]:
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "hyperpod-cdk --help": [CLI, "--help"],
        "hyperpod-cdk status --help": [CLI, "status", "--help"],
        "python -c 'import boto3, rich' (for scale)": [sys.executable, "-c", IMPORTS],
        "hyperpod-cdk status bench --json (moto)": [CLI, "status", "bench", "--json"],
        "hyperpod-cdk status bench (moto, table)": [CLI, "status", "bench"],
    }


def wall(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def moto_cluster(env: dict[str, str]) -> None:
    session = boto3.session.Session(
        region_name=env["AWS_REGION"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    client = session.client("sagemaker", endpoint_url=env["AWS_ENDPOINT_URL"])
    group = {
        "InstanceType": "ml.m5.xlarge",
        "LifeCycleConfig": {"SourceS3Uri": "s3://sagemaker-bench/lifecycle/", "OnCreate": "on_create.sh"},
        "ExecutionRole": "arn:aws:iam::123456789012:role/bench",
        "ThreadsPerCore": 1,
    }
    client.create_cluster(
        ClusterName="bench",
        InstanceGroups=[
            {**group, "InstanceGroupName": "controller", "InstanceCount": 1, "SlurmConfig": {"NodeType": "Controller"}},
            {**group, "InstanceGroupName": "compute", "InstanceCount": 8, "SlurmConfig": {"NodeType": "Compute"}},
        ],
        VpcConfig={"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ENDPOINT_URL=f"http://{host}:{port}",
        AWS_REGION="us-west-2",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_EC2_METADATA_DISABLED="true",
    )
    try:
        moto_cluster(env)
        timed = commands()
        times: dict[str, list[float]] = {name: [] for name in timed}
        for command in timed.values():
            wall(command, env)  # warm the page cache and .pyc files
        for _ in range(args.runs):
            for name, command in timed.items():
                times[name].append(wall(command, env))
    finally:
        server.stop()
    bare = statistics.median(times["python -c pass"])
    load = os.getloadavg()[0]
    print(
        f"Machine: nproc {os.cpu_count()}, {platform.system()} {platform.machine()}, Python {platform.python_version()}"
    )
    print(f"1-minute load average at the end: {load:.2f}\n")
    print("| command | median (s) | min (s) | ratio to `python -c pass` |")
    print("|---|---:|---:|---:|")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"| `{name}` | {median:.3f} | {min(samples):.3f} | {median / bare:.1f}x |")
    print(f"\n{args.runs} runs each, interleaved; command: `.venv/bin/python bench/cli_startup.py --runs {args.runs}`")


if __name__ == "__main__":
    main()
