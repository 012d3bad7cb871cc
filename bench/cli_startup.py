"""Operator CLI startup: `hyperpod-cdk --help`, `status --help` and `status CLUSTER --json` vs `python -c pass`.

Run in the repo root: ``.venv/bin/python bench/cli_startup.py`` (needs the test extra: moto). The script starts a
moto server on 127.0.0.1 with one cluster, so `status` makes its real calls (DescribeCluster, ListClusterNodes)
over HTTP. Each command runs as a fresh process, alternating, ``--runs`` times (bench/timing.py); the report gives
medians and the ratio to the bare interpreter measured in the same run. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import sys

import boto3

from timing import cli, measure, moto_env, report

CLI = cli()
IMPORTS = "import boto3, botocore.config, rich.console, rich.table"


def commands() -> dict[str, list[str]]:
    return {
        "hyperpod-cdk --help": [CLI, "--help"],
        "hyperpod-cdk status --help": [CLI, "status", "--help"],
        "python -c 'import boto3, rich' (for scale)": [sys.executable, "-c", IMPORTS],
        "hyperpod-cdk status bench --json (moto)": [CLI, "status", "bench", "--json"],
        "hyperpod-cdk status bench (moto, table)": [CLI, "status", "bench"],
    }


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
    with moto_env() as env:
        moto_cluster(env)
        times = measure(commands(), args.runs, env)
    command_line = f".venv/bin/python bench/cli_startup.py --runs {args.runs}"
    print(report(times, {"hyperpod-cdk --help": 3.0}, command_line))


if __name__ == "__main__":
    main()
