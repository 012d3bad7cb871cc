"""The login pool on the local cluster (issue #41, part 4; root only): three figures, reported, never asserted.

Run in the repo root as root: ``.venv/bin/python bench/login_pool.py [--rounds N]``. It brings up the cluster of
``tests/test_local_login_pool.py`` (tests/directory_cluster.py: two login nodes behind ``login_pool:``, bootstrapped
at once) and puts :class:`hyperpod_local.login_relay.LoginRelay` in front of them (checks every 0.5 s, 2 in a row to
change state), then measures:

1. **Host-key install time**: the ``login-pool-host-keys`` step's seconds in each login node's bootstrap log (the node
   that generated and wrote the bundle, the one that lost the race and installed it) and on a replaced node (reads
   the bundle, installs it).
2. **Session spread**: 40 ``ssh`` sessions through the relay; the count per node.
3. **Drain reaction**: ``login drain`` on one node until the relay marks it unhealthy (no new session goes there), and
   ``undrain`` until it is healthy again; N rounds, median and range.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from directory_cluster import LOGIN, LOGIN_2, bring_up  # noqa: E402
from hyperpod_local.login_relay import for_cluster  # noqa: E402
from training_runtime.login_pool.params import DEFAULT_HEALTH_PORT  # noqa: E402
from training_runtime.steps.login_pool import POOL_PROGRAM  # noqa: E402

STEP = "login-pool-host-keys"


def step_seconds(cluster: object, node: str) -> tuple[float, str]:
    """The host-key step's seconds in ``node``'s bootstrap log, and where its keys came from."""
    text = cluster.exec(node, ["cat", "/var/log/hyperpod-cdk/bootstrap.log"]).stdout  # type: ignore[attr-defined]
    seconds, source = 0.0, "?"
    for line in text.splitlines():
        record = json.loads(line) if line.startswith("{") else {}
        if record.get("event") == "step" and record.get("step") == STEP:
            seconds = float(record["seconds"])
        if record.get("event") == "login_pool_host_keys":
            source = str(record["source"])
    return seconds, source


def wait(relay: object, address: str, healthy: bool) -> float:
    started = time.monotonic()
    while relay.healthy()[address] != healthy:  # type: ignore[attr-defined]
        time.sleep(0.02)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        for shared in bring_up(Path(workdir)):
            local = shared.local
            print(
                f"machine: nproc {len(__import__('os').sched_getaffinity(0))}, {platform.system()} "
                f"{platform.machine()}, Python {platform.python_version()}"
            )
            for node in (LOGIN, LOGIN_2):
                seconds, source = step_seconds(local, node)
                print(f"{STEP} on {node}: {seconds:.3f} s ({source})")
            code, _ = local.replace(LOGIN_2)
            seconds, source = step_seconds(local, LOGIN_2)
            print(f"{STEP} on a replaced {LOGIN_2}: {seconds:.3f} s ({source}; bootstrap exit {code})")
            key = Path(workdir) / "id"
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
            for node in (LOGIN, LOGIN_2):
                local.exec(
                    node,
                    ["sh", "-c", "umask 077; mkdir -p /root/.ssh; cat > /root/.ssh/authorized_keys"],
                    input=(key.parent / "id.pub").read_text(),
                )
            options = {"interval_s": 0.5, "healthy_threshold": 2, "unhealthy_threshold": 2}
            with for_cluster(local, (LOGIN, LOGIN_2), DEFAULT_HEALTH_PORT, **options) as relay:
                host, port = relay.address
                ssh = [
                    "ssh",
                    "-F",
                    "/dev/null",
                    "-i",
                    str(key),
                    "-p",
                    str(port),
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "StrictHostKeyChecking=no",
                    "-o",
                    "UserKnownHostsFile=/dev/null",
                    f"root@{host}",
                    "hostname",
                ]
                split = Counter(
                    subprocess.run(ssh, capture_output=True, text=True, check=True).stdout.strip() for _ in range(40)
                )
                print(f"40 sessions through the relay: {dict(split)}")
                address = local.node(LOGIN).ip
                drains, undrains = [], []
                for _ in range(args.rounds):
                    local.exec(LOGIN, [POOL_PROGRAM, "drain"])
                    drains.append(wait(relay, address, False))
                    local.exec(LOGIN, [POOL_PROGRAM, "undrain"])
                    undrains.append(wait(relay, address, True))
                for what, values in (("drain -> unhealthy", drains), ("undrain -> healthy", undrains)):
                    print(
                        f"{what}: median {statistics.median(values):.2f} s, min {min(values):.2f}, "
                        f"max {max(values):.2f} ({args.rounds} rounds; checks every 0.5 s, threshold 2)"
                    )


if __name__ == "__main__":
    main()
