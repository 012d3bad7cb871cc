"""The scaler drills' machinery (tests/test_local_scaler.py, bench/scaler_overhead.py): a local HyperPod cluster
with its emulated control plane and the REAL scaler service on the controller, and what the drills read back —
the control plane's event record, the scaler's own log, Slurm's jobs and the scaler's persisted state.

The cluster is created without its lifecycle scripts, the control plane is started, then the scripts run: the
controller's bootstrap starts the scaler (step ``scaler``), so its first cycle already reaches the control plane,
as on HyperPod where the API exists before any node. The scaler's cycle and its idle minute are shortened through
the parameters file (``hyperpod_cdk.emulation.scaler_interval_s``/``scaler_minute_s``, written by the emulator
only), never by a test switch in the service.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from hyperpod_local import LocalCluster
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.hyperpod_files import SLURM_ETC
from hyperpod_local.namespaces import node_environment
from hyperpod_local.plan import UpOptions
from local_support import variant
from training_runtime.node import HYPERPOD

CONFIG = Path(__file__).resolve().parent / "fixtures" / "scaler" / "cluster.yaml"
NAME = "drill-cluster"
GROUP = "burst"
PARTITION = "burst"
BURST_TYPE = "ml.c5.2xlarge"
MAX = 3
INTERVAL_S = 1.0
"""The scaler's cycle in the drills (60 s on HyperPod)."""
MINUTE_S = 4.0
"""The scaler's idle minute in the drills: ``idle_minutes: 1`` is 4 s."""
LAUNCH_LATENCY_S = 2.0
"""The emulated launch latency (AWS: 15-25 minutes per batch)."""
SCALER_LOG = "/var/log/hyperpod-cdk/scaler.log"
SCALER_STATE = "/var/lib/hyperpod-cdk/scaler/state.json"
SCALER_PID = "/run/hyperpod-cdk-scaler.pid"
TIMEOUT_S = 120.0


@contextmanager
def drill_cluster(workdir: Path, prefix: str, subnet: str) -> Iterator[LocalCluster]:
    cluster = LocalCluster.up(
        CONFIG,
        workdir,
        variant(platform=HYPERPOD),
        UpOptions(prefix=prefix, subnet=subnet, scaler_timing=(INTERVAL_S, MINUTE_S), bootstrap=False),
    )
    try:
        control_plane.start(cluster, launch_latency=LAUNCH_LATENCY_S)
        cluster.bootstrap_all()
        cluster.wait_idle(TIMEOUT_S)
        yield cluster
    finally:
        cluster.down()


def sagemaker(cluster: LocalCluster) -> Any:
    """boto3 on the host, at the control plane (``AWS_ENDPOINT_URL``'s value), with the instance role's keys."""
    env = control_plane.client_env(cluster)
    session = boto3.session.Session(
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=env["AWS_SESSION_TOKEN"],
        region_name=env["AWS_REGION"],
    )
    return session.client("sagemaker", endpoint_url=env["AWS_ENDPOINT_URL"], config=Config(retries={"max_attempts": 2}))


def wait_for(what: str, check: Callable[[], Any], timeout: float = TIMEOUT_S, step: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(step)


def ctl(cluster: LocalCluster, *argv: str) -> str:
    """A command on the controller; its output (AssertionError when it fails)."""
    result = cluster.exec(cluster.layout.controller.name, list(argv), timeout=60)
    assert result.returncode == 0, f"{' '.join(argv)}: {result.stdout}{result.stderr}"
    return result.stdout


def counts(client: Any) -> tuple[int, int]:
    """The drilled group's (CurrentCount, TargetCount)."""
    groups = client.describe_cluster(ClusterName=NAME)["InstanceGroups"]
    found = next(g for g in groups if g["InstanceGroupName"] == GROUP)
    return found["CurrentCount"], found["TargetCount"]


def submit(cluster: LocalCluster, *argv: str) -> str:
    """``sbatch --parsable -p burst ARGV``, plainly, whatever the group's count: at 0 the controller's job_submit
    script holds the job (Slurm alone would refuse it) and the scaler releases it (docs/scaler.md, "A group
    at 0")."""
    return ctl(cluster, "sbatch", "--parsable", "-p", PARTITION, *argv).strip().split(";")[0]


def topology(cluster: LocalCluster) -> tuple[str | None, str]:
    """HyperPod's automatic topology as the controller has it now: the ``TopologyPlugin`` its slurm.conf names
    (None: none) and ``scontrol show topology``'s answer (the switches slurmctld loaded)."""
    conf = ctl(cluster, "cat", f"{SLURM_ETC}/slurm.conf")
    plugin = re.findall(r"^TopologyPlugin=(\S+)", conf, re.MULTILINE)
    shown = cluster.exec(cluster.layout.controller.name, ["scontrol", "show", "topology"], timeout=60)
    return (plugin[-1] if plugin else None), shown.stdout + shown.stderr


def job_field(cluster: LocalCluster, job: str, key: str) -> str:
    out = ctl(cluster, "scontrol", "-o", "show", "job", job)
    found = re.search(rf"\b{key}=(.*?)(?= \w+=|$)", out.strip())
    return found.group(1) if found else ""


def job_state(cluster: LocalCluster, job: str) -> str:
    return job_field(cluster, job, "JobState")


def group_nodes(cluster: LocalCluster) -> list[str]:
    """The drilled group's nodes (emulator names) as the cluster's state file has them now."""
    return [n.name for n in LocalCluster.open(cluster.workdir).nodes if n.group == GROUP]


def back_to_zero(cluster: LocalCluster, client: Any, timeout: float = TIMEOUT_S) -> None:
    """Wait until the scaler has taken the group back to 0 and its nodes are gone from the cluster and Slurm."""
    wait_for("the group back at 0", lambda: counts(client) == (0, 0) and not group_nodes(cluster), timeout)
    wait_for("the partition empty", lambda: not ctl(cluster, "sinfo", "-h", "-N", "-p", PARTITION, "-o", "%N").strip())


# --- what the drills read back ---------------------------------------------------------------
def plane_events(cluster: LocalCluster, since: float = 0.0) -> list[dict[str, Any]]:
    """The control plane's record (``events.jsonl``: every target change, launch, capacity failure, delete)."""
    path = control_plane.directory(cluster) / "events.jsonl"
    if not path.exists():
        return []
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e["time"] >= since and e.get("group") in (GROUP, None)]


ADDED = re.compile(r"Target count of (\S+) increased by (\d+) to (\d+)")


def targets(events: list[dict[str, Any]]) -> list[int]:
    """The group's TargetCount after each change in the record: a BatchAddClusterNodes raises it to the value the
    event names, each node deleted lowers it by one."""
    out: list[int] = []
    for event in events:
        text = event["description"]
        added = ADDED.match(text)
        if added and added.group(1) == GROUP:
            out.append(int(added.group(3)))
        elif "deleted by BatchDeleteClusterNodes" in text or "removed by UpdateCluster" in text:
            out.append((out[-1] if out else 0) - 1)
        elif text.startswith(f"Target count of {GROUP} set from"):
            out.append(int(text.rsplit(" ", 1)[1]))
    return out


def scaler_log(cluster: LocalCluster, since: float = 0.0, event: str | None = None) -> list[dict[str, Any]]:
    """The scaler's own log on the controller (JSON lines), from ``since`` (epoch seconds)."""
    out = ctl(cluster, "cat", SCALER_LOG)
    lines = []
    for line in out.splitlines():
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and found.get("ts", 0) >= since and (event is None or found.get("event") == event):
            lines.append(found)
    return lines


def scaler_state(cluster: LocalCluster) -> dict[str, Any]:
    return dict(json.loads(ctl(cluster, "cat", SCALER_STATE)))


@dataclass(frozen=True)
class JobRecord:
    job: str
    nodes: tuple[str, ...]
    start: float
    end: float | None


def slurm_jobs(cluster: LocalCluster) -> list[JobRecord]:
    """Every job slurmctld still knows (``scontrol show job``: MinJobAge keeps finished ones for 300 s), with the
    Slurm nodes it ran on and when."""
    out = ctl(cluster, "scontrol", "-o", "--details", "show", "job")
    records = []
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if not fields.get("JobId") or fields.get("NodeList") in (None, "", "(null)"):
            continue
        hosts = ctl(cluster, "scontrol", "show", "hostnames", fields["NodeList"]).split()
        records.append(JobRecord(fields["JobId"], tuple(hosts), _epoch(fields["StartTime"]), _epoch(fields["EndTime"])))
    return records


def _epoch(text: str) -> float | None:
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def busy_deletes(cluster: LocalCluster, since: float) -> list[str]:
    """Each node the scaler deleted (its ``scaler_delete`` log lines) while a job ran on it; [] when none."""
    jobs = slurm_jobs(cluster)
    problems = []
    for deleted in scaler_log(cluster, since, "scaler_delete"):
        for node in deleted["nodes"]:
            for job in jobs:
                running = job.start <= deleted["ts"] and (job.end is None or job.end > deleted["ts"])
                if node in job.nodes and running:
                    problems.append(f"{node} deleted at {deleted['ts']} while job {job.job} ran on it")
    return problems


def scaler_pid(cluster: LocalCluster) -> int | None:
    result = cluster.exec(cluster.layout.controller.name, ["cat", SCALER_PID], timeout=30)
    return int(result.stdout) if result.returncode == 0 and result.stdout.strip().isdigit() else None


def background(cluster: LocalCluster, argv: list[str]) -> subprocess.Popen[str]:
    """A command on the controller that runs while the drill goes on (an interactive ``salloc``)."""
    command = cluster.namespaces.command(cluster.layout.controller.name, argv)
    env = node_environment(None)
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
