"""Directory users on the local cluster (issue #41; root only): three figures, reported, never asserted.

Run in the repo root as root: ``.venv/bin/python bench/directory.py [--rounds N]``. It brings up the config of
``tests/test_local_directory.py`` (HyperPod platform; slapd with LDAPS on the controller, the team ``vision`` following
the directory group ``vision``, synced every 5 s) and measures:

1. **Directory change to a working sbatch**: alice is added to the group with ldapmodify, then ``sbatch -A vision``
   is tried as alice every 0.2 s until Slurm accepts it; then she is removed and the same until Slurm refuses it.
   N rounds; the median and the range, against the sync interval.
2. **Bootstrap time added by SSSD**: the login node's bootstrap log, the directory steps' durations
   (``packages:directory`` … ``directory-clash``) against the whole bootstrap's.
3. **Lookup latency**: ``getent passwd`` and ``id`` for the directory user and for the declared user (files), 200
   times each inside the node, each run timed alone (median), warm (SSSD's caches filled) and cold (``sss_cache -E``
   before each run, untimed: the lookup goes to the directory).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from directory_cluster import (  # noqa: E402
    ALICE_UID,
    ARN,
    CONTROLLER,
    LOGIN,
    PASSWORD,
    SYNC_S,
    VISION_GID,
    directory_config,
)
from directory_server import DirectoryServer, group_ldif, make_tls, user_ldif  # noqa: E402
from hyperpod_local import LocalCluster  # noqa: E402
from hyperpod_local.control_plane import local as control_plane  # noqa: E402
from hyperpod_local.plan import UpOptions  # noqa: E402
from hyperpod_local.variant import Variant  # noqa: E402
from training_runtime.node import HYPERPOD  # noqa: E402

DIRECTORY_STEPS = (
    "packages:directory",
    "directory-sssd",
    "daemon:sssd.service",
    "directory-pam",
    "directory-ssh",
    "directory-clash",
)


def until(check: object, limit_s: float = 60.0) -> float:
    started = time.monotonic()
    while not check():  # type: ignore[operator]
        if time.monotonic() - started > limit_s:
            sys.exit(f"gave up after {limit_s:.0f} s")
        time.sleep(0.2)
    return time.monotonic() - started


def sbatch(cluster: LocalCluster) -> tuple[int, str]:
    done = cluster.exec(LOGIN, ["su", "-l", "alice", "-c", "sbatch -A vision --wrap true"], timeout=60)
    return done.returncode, done.stdout + done.stderr


def loop_ms(cluster: LocalCluster, command: str, count: int, cold: bool) -> float:
    """Milliseconds per ``command``, the median of ``count`` runs timed one by one inside the login node (date's
    nanoseconds around the command alone); ``cold``: every entry of SSSD's caches expired first (``sss_cache -E``,
    untimed), so each lookup goes to the directory."""
    flush = "sss_cache -E; " if cold else ""
    script = (
        f"for i in $(seq {count}); do {flush}s=$(date +%s%N); {command} >/dev/null; e=$(date +%s%N); "
        "echo $(( (e - s) / 1000 )); done"
    )
    found = [int(line) for line in cluster.exec(LOGIN, ["bash", "-c", script]).stdout.split()]
    return statistics.median(found) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("the local cluster needs root")
    with tempfile.TemporaryDirectory(prefix="hpcdk-bench-dir-") as scratch:
        workdir = Path(scratch)
        tls = make_tls(CONTROLLER)
        options = UpOptions(prefix="hpbdir", subnet="10.239.0.0/24", bootstrap=False)
        cluster = LocalCluster.up(directory_config(workdir, tls.ca), workdir, Variant(platform=HYPERPOD), options)
        try:
            control_plane.start(cluster)
            control_plane.put_secret(cluster, ARN, PASSWORD)
            server = DirectoryServer(cluster, CONTROLLER)
            server.start(tls, PASSWORD)
            server.modify(
                "add", user_ldif("alice", ALICE_UID, VISION_GID) + "\n" + group_ldif("vision", VISION_GID, ())
            )
            cluster.bootstrap_all()
            cluster.wait_idle()
            log = (workdir / "logs" / f"{LOGIN}-bootstrap.log").read_text()
            events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
            steps = {e["step"]: e.get("seconds", 0.0) for e in events if e.get("event") == "step" and "step" in e}
            total = events[-1]["ts"] - events[0]["ts"]
            joined, left = [], []
            for _ in range(args.rounds):
                server.set_members("vision", ("alice",))
                joined.append(until(lambda: sbatch(cluster)[0] == 0))
                server.set_members("vision", ())
                left.append(until(lambda: sbatch(cluster)[0] != 0))
            lookups = {
                (what, user, cold): loop_ms(cluster, f"{what} {user}", 200 if not cold else 50, cold)
                for what in ("getent passwd", "id")
                for user in ("alice", "researcher")
                for cold in (False, True)
            }
        finally:
            cluster.down()
    print(
        f"Machine: nproc {os.cpu_count()}, {platform.system()} {platform.machine()}, Python {platform.python_version()}"
    )
    print(f"\nSync interval {SYNC_S} s, {args.rounds} rounds")
    print("| Change | Median s | Min s | Max s | Median / interval |")
    print("| --- | --: | --: | --: | --: |")
    for name, values in (("added to the group -> sbatch accepted", joined), ("removed -> sbatch refused", left)):
        median = statistics.median(values)
        print(f"| {name} | {median:.1f} | {min(values):.1f} | {max(values):.1f} | {median / SYNC_S:.2f} |")
    ours = sum(steps.get(s, 0.0) for s in DIRECTORY_STEPS)
    print(f"\nLogin node bootstrap: {total:.2f} s in all, the directory's steps {ours:.2f} s ({ours / total:.0%})")
    for step in DIRECTORY_STEPS:
        print(f"- {step}: {steps.get(step, 0.0):.2f} s")
    print(
        "\n| Lookup (median ms) | Directory user warm / cold | Declared user warm / cold | Directory / declared warm |"
    )
    print("| --- | --: | --: | --: |")
    for what in ("getent passwd", "id"):
        a, r = lookups[(what, "alice", False)], lookups[(what, "researcher", False)]
        ac, rc = lookups[(what, "alice", True)], lookups[(what, "researcher", True)]
        print(f"| `{what}` | {a:.2f} / {ac:.2f} | {r:.2f} / {rc:.2f} | {a / r:.1f}x |")


if __name__ == "__main__":
    main()
