"""Preflight benchmark: `hyperpod-cdk preflight` on a typical config against moto, vs offline `validate` of it.

Run in the repo root: ``.venv/bin/python bench/preflight.py`` (needs the test extra: moto). The script starts a
moto server on 127.0.0.1, builds a real-looking account in it (tests/preflight_support.py: an existing VPC, subnet
and security group, an adopted FSx for Lustre file system, a lifecycle bucket encrypted with a KMS key, a training
plan, another cluster holding p5 quota) and runs the preflight command in-process through real botocore over
HTTP, ``--runs`` times, alternating with the offline ``validate`` of the same file (the baseline) and with
preflight on one thread (what concurrency saves). A fresh account object (no shared answers) each run; the
process, imports and clients are warm. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from moto.server import ThreadedMotoServer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from hyperpod_cdk.core.config import parse_model  # noqa: E402
from hyperpod_cdk.ops.context import OpsContext, make_session  # noqa: E402
from hyperpod_cdk.preflight import command, runner  # noqa: E402
from hyperpod_cdk.validate import validate_file  # noqa: E402
from preflight_support import NOW, AccountFakes, MotoAccount, plan  # noqa: E402

P5 = "ml.p5.48xlarge"


def typical_config(acct: MotoAccount, fakes: AccountFakes) -> dict[str, Any]:
    fakes.plans["p5-plan"] = plan("p5-plan", count=8)
    key = acct.key()
    fs_id = acct.file_system("LUSTRE", acct.sg, LustreConfiguration={"MountName": "abcdef"})
    acct.cluster("research", P5, 4)
    return {
        "cluster_name": "bench",
        "network": {"vpc_id": acct.vpc, "subnet_id": acct.subnet, "security_group_id": acct.sg},
        "instance_groups": [
            {"name": "controller", "role": "controller", "instance_type": "ml.m5.4xlarge", "count": 1},
            {"name": "login", "role": "login", "instance_type": "ml.m5.4xlarge", "count": 1},
            {
                "name": "p5",
                "instance_type": P5,
                "count": 8,
                "training_plan_arn": "arn:aws:sagemaker:us-west-2:123456789012:training-plan/p5-plan",
            },
        ],
        "storage": {"existing": {"file_system_id": fs_id, "mount_name": "abcdef", "security_group_id": acct.sg}},
        "lifecycle": {"bucket_name": acct.bucket("sagemaker-bench-lifecycle", key=key)},
        "organization": {"kms_key_arn": key},
        "observability": {"enabled": False},
    }


def timed_preflight(path: str, fakes: AccountFakes) -> tuple[float, int]:
    def session(profile: str | None, region: str | None) -> Any:
        found = make_session(profile, region)
        fakes.install(found)
        return found

    out = io.StringIO()
    ctx = OpsContext(session_factory=session, now=lambda: NOW.timestamp(), stdout=out, stderr=out)
    start = time.perf_counter()
    code = command.main(["preflight", path, "--json"], ctx)
    return time.perf_counter() - start, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_REGION="us-west-2",
        AWS_ENDPOINT_URL=f"http://{host}:{port}",
        AWS_EC2_METADATA_DISABLED="true",
    )
    import pytest

    patcher = pytest.MonkeyPatch()
    from preflight_support import enrich_moto

    enrich_moto(patcher)  # moto's FSx records get Lifecycle and network interfaces, as the service returns
    try:
        fakes = AccountFakes(quotas={f"{P5} for cluster usage": 16, "ml.m5.4xlarge for cluster usage": 4})
        data = typical_config(MotoAccount(), fakes)
        with tempfile.TemporaryDirectory() as scratch:
            path = str(Path(scratch) / "cluster.yaml")
            Path(path).write_text(yaml.safe_dump(data))
            times: dict[str, list[float]] = {"validate (offline)": [], "preflight": [], "preflight, 1 thread": []}
            code = timed_preflight(path, fakes)[1]  # warm imports and the server
            for _ in range(args.runs):
                start = time.perf_counter()
                validate_file(path)
                times["validate (offline)"].append(time.perf_counter() - start)
                times["preflight"].append(timed_preflight(path, fakes)[0])
                workers, runner.WORKERS = runner.WORKERS, 1
                try:
                    times["preflight, 1 thread"].append(timed_preflight(path, fakes)[0])
                finally:
                    runner.WORKERS = workers
            session = make_session(None, None)
            fakes.install(session)
            account = command.open_account(None, None, OpsContext(session_factory=lambda p, r: session))
            command.check_config(parse_model(data), account)
            rules = len({rule for rule, _ in account.calls})
    finally:
        patcher.undo()
        server.stop()
    base = statistics.median(times["validate (offline)"])
    print(f"machine: nproc {os.cpu_count()}, Python {platform.python_version()}; preflight exit status {code}")
    print(f"{rules} rules made {len(account.calls)} calls")
    print("| run (in-process, warm) | median (s) | min (s) | ratio to offline validate |")
    print("|---|---:|---:|---:|")
    for name, samples in times.items():
        median = statistics.median(samples)
        print(f"| {name} | {median:.3f} | {min(samples):.3f} | {median / base:.1f}x |")
    print(f"\n{args.runs} runs each, interleaved; command: `.venv/bin/python bench/preflight.py --runs {args.runs}`")


if __name__ == "__main__":
    main()
