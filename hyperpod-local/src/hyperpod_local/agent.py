"""The emulated HyperPod cluster agent: reboots or replaces compute nodes and answers ``srun --auto-resume=1``.

It is part of the emulated HyperPod platform: ``LocalCluster.up`` (``Variant(platform="hyperpod")``) starts it on
the host, one process per cluster (:func:`enable`; ``down`` stops it), and every node gets the srun wrapper in
HyperPod's part, before its lifecycle script (:func:`install`, from :func:`hyperpod_local.hyperpod_platform.prepare`),
as HyperPod's AMI has its plugin before any script runs. It acts as HyperPod's agent does for a Slurm cluster
with automatic node recovery (docs/local-cluster.md, "Auto-resume"):

* an instance that fails (a compute node whose namespaces died: :meth:`LocalCluster.crash`) is replaced;
* a compute node whose Slurm reason is exactly ``Action:Reboot`` is rebooted, exactly ``Action:Replace``
  replaced (:func:`recovery_requests`; an operator's ``scontrol update node=<name> state=fail reason=...`` or
  the runtime's health checks set them); any other reason, ``action:replace`` or ``Action:Reboot now``
  included, is left alone, as HyperPod leaves it;
* a request from the srun wrapper (:mod:`hyperpod_local.autoresume`) after a failed step is answered
  ``RETRYSTEP`` when a node of the job was rebooted or replaced since the step started, or needed it and now was.

Replacing (:meth:`LocalCluster.replace`) is what HyperPod does: the instance is terminated with its disks, a new one
with the same name, address and role boots with an empty disk, gets the lifecycle prefix and runs the
entry script, and returns to Slurm. Rebooting (:meth:`LocalCluster.reboot`) keeps the disk and does not run the
lifecycle script: HyperPod's part and the node's enabled daemons come back (:mod:`hyperpod_local.enabled`).
A node rebooted or replaced for one of the two reasons is resumed in Slurm. Sources: docs/local-cluster.md,
"Reboot and replace". The mailbox is a directory on the shared file system
(:data:`MAILBOX`): the wrapper writes ``requests/<name>.json``, the agent writes ``answers/<name>.json`` and
``replaced/<node>.json``. The mailbox speaks the nodes' Slurm names (``ip-a-b-c-d``, or the instance names in
the ``instance`` naming), as the job sees them; the agent works on instances (:attr:`LocalNode.name`) and
translates at that boundary (:meth:`ClusterHandle.slurm_name`).
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import tarfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_local import autoresume
from hyperpod_local.host_service import HostService, module_argv
from hyperpod_local.state import ClusterHandle, LocalClusterError
from training_runtime.health.results import HYPERPOD_REASONS, REBOOT, REPLACE
from training_runtime.hyperpod_facts import SLURM_PREFIX

DIRECTORY = "cluster/agent"
"""Under the work directory: settings (present = the cluster has an agent), pid, log, events."""
MAILBOX = ".hyperpod-agent"
"""Under the shared directory (the nodes' FSx mount): ``requests/`` and ``answers/``."""
WRAPPER_PATH = SLURM_PREFIX + "/bin/srun"
REAL_SRUN_MOVED = SLURM_PREFIX + "/libexec/srun"
"""Where an ``/opt/slurm/bin/srun`` of Slurm's own is moved when the wrapper takes its place."""
WRAPPER_MARK = "hyperpod-cdk auto-resume wrapper"
ACTIONS = {reason: action for action, reason in HYPERPOD_REASONS.items()}
"""Slurm reason -> REBOOT or REPLACE: the only two reasons HyperPod acts on, matched whole and case-sensitive."""
LIVENESS_POLL_S = 0.2
SLURM_POLL_S = 5.0
RETRY_WINDOW_S = 1.0
"""A node replaced up to this long before a step started still counts for it (clock granularity)."""
JOB_ID = re.compile(r"^\d+(_\d+)?$")


class AgentRequestError(ValueError):
    """A mailbox request the agent cannot act on; the message says which field and why."""


@dataclass(frozen=True)
class Request:
    job_id: str
    nodes: tuple[str, ...]
    step_started: float


def parse_request(text: str, known: Iterable[str]) -> Request:
    """A wrapper's request, checked: a JSON object with a job id, the job's nodes (all of this cluster)
    and the step's start time. Every problem is named at once."""
    try:
        data = json.loads(text)
    except ValueError as error:
        raise AgentRequestError(f"not JSON ({error})") from None
    if not isinstance(data, dict):
        raise AgentRequestError(f"expected a JSON object, got {type(data).__name__}")
    problems = []
    job_id, nodes, started = data.get("job_id"), data.get("nodes"), data.get("step_started")
    if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
        problems.append(f"job_id: got {job_id!r}; allowed: a Slurm job id such as '42'")
    names = set(known)
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) for n in nodes):
        problems.append(f"nodes: got {nodes!r}; allowed: a non-empty list of node names")
    else:
        unknown = sorted(set(nodes) - names)
        if unknown:
            problems.append(f"nodes: {', '.join(unknown)} not in this cluster (its nodes: {', '.join(sorted(names))})")
    if not isinstance(started, (int, float)) or isinstance(started, bool):
        problems.append(f"step_started: got {started!r}; allowed: seconds since the epoch")
    if problems:
        raise AgentRequestError("; ".join(problems))
    return Request(job_id=str(job_id), nodes=tuple(nodes), step_started=float(started))  # type: ignore[arg-type]


def decide(request: Request, replaced_at: Mapping[str, float], unhealthy: Iterable[str]) -> tuple[list[str], list[str]]:
    """(nodes to replace now, nodes replaced for this step already): a node of the job that is unhealthy
    and was not replaced since the step started needs replacing; one replaced since then needs nothing."""
    since = request.step_started - RETRY_WINDOW_S
    done = [n for n in request.nodes if replaced_at.get(n, float("-inf")) >= since]
    bad = set(unhealthy)
    return [n for n in request.nodes if n in bad and n not in done], done


def answer(replaced: Iterable[str]) -> dict[str, Any]:
    nodes = sorted(set(replaced))
    return {"action": autoresume.RETRYSTEP if nodes else "NONE", "replaced": nodes}


def recovery_requests(sinfo_output: str) -> list[tuple[str, str]]:
    """(node, REBOOT or REPLACE) for each node whose Slurm reason is exactly one of HyperPod's, from
    ``sinfo -h -N -o '%N|%E'`` (a node listed in several partitions counts once). The reason is compared
    whole: AWS documents the two strings, and a reason with more text, another case or spaces is not one."""
    found: dict[str, str] = {}
    for line in sinfo_output.splitlines():
        name, _, reason = line.partition("|")
        action = ACTIONS.get(reason)
        if action is not None:
            found.setdefault(name.strip(), action)
    return list(found.items())


# --- node operations ------------------------------------------------------------------------------
def install(cluster: ClusterHandle, name: str) -> None:
    """srun with ``--auto-resume`` on a node (the wrapper, in place of Slurm's srun, which it runs), as
    HyperPod's AMI has it; part of :func:`hyperpod_local.hyperpod_platform.prepare`, which also writes the marker.
    Idempotent: Slurm's srun is moved aside once."""
    mailbox = f"{cluster.state.fsx_mount_path}/{MAILBOX}"
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        text = f"#!/usr/bin/env python3\n# {WRAPPER_MARK}\n" + wrapper_source()
        info = tarfile.TarInfo("srun")
        info.size, info.mode = len(text.encode()), 0o755
        tar.addfile(info, io.BytesIO(text.encode()))
    script = f"""set -e
mkdir -p /opt/slurm/bin {os.path.dirname(REAL_SRUN_MOVED)}
if [ -e {WRAPPER_PATH} ] && ! grep -q '{WRAPPER_MARK}' {WRAPPER_PATH}; then mv {WRAPPER_PATH} {REAL_SRUN_MOVED}; fi
if [ -x {REAL_SRUN_MOVED} ]; then real={REAL_SRUN_MOVED}; else real=$(PATH=/usr/bin:/bin command -v srun); fi
tar -C /opt/slurm/bin -xf -
printf '{{"mailbox": "%s", "real_srun": "%s"}}\\n' '{mailbox}' "$real" >{autoresume.SETTINGS_PATH}
"""
    result = cluster.exec(name, ["/bin/sh", "-c", script], input=archive.getvalue(), timeout=60)
    if result.returncode != 0:
        raise LocalClusterError(f"node {name}: installing the auto-resume srun failed: {result.stderr.strip()}")


def wrapper_source() -> str:
    return Path(autoresume.__file__).read_text()


# --- the agent process ----------------------------------------------------------------------------
def agent_dir(cluster: ClusterHandle) -> Path:
    return cluster.workdir / DIRECTORY


def mailbox_dir(cluster: ClusterHandle) -> Path:
    return cluster.workdir / "shared" / MAILBOX


def enabled(cluster: ClusterHandle) -> bool:
    return (agent_dir(cluster) / "settings.json").exists()


def enable(cluster: ClusterHandle) -> None:
    """The agent's mailbox and settings, and the agent running: ``LocalCluster.up`` on the HyperPod platform
    (the nodes' srun wrapper is installed by HyperPod's part on each node)."""
    directory = agent_dir(cluster)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "settings.json").write_text(json.dumps({"mailbox": str(mailbox_dir(cluster))}) + "\n")
    for sub in ("requests", "answers", "replaced"):
        path = mailbox_dir(cluster) / sub
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o1777)  # jobs of every user write requests
    start(cluster)


def service(cluster: ClusterHandle) -> HostService:
    """The agent's process: ``python -m hyperpod_local.processes hyperpod_local.agent --workdir W``, one per cluster."""
    argv = module_argv("hyperpod_local.agent", cluster.workdir)
    return HostService("the HyperPod agent", agent_dir(cluster), argv, argv[2:], log_name="agent.log")


def start(cluster: ClusterHandle) -> int:
    """Start the agent process for ``cluster`` (once); returns its pid."""
    return service(cluster).start()


def stop(cluster: ClusterHandle, timeout: float = 30.0) -> None:
    service(cluster).stop(timeout)


def running(cluster: ClusterHandle) -> bool:
    return service(cluster).running()


def events(cluster: ClusterHandle) -> list[dict[str, Any]]:
    """What the agent did, oldest first: ``{"time", "node", "event", ...}`` (wall-clock seconds)."""
    path = agent_dir(cluster) / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Agent:
    """One cluster's agent loop (:func:`run` drives it)."""

    def __init__(self, cluster: ClusterHandle) -> None:
        self.cluster = cluster
        self.workers = [n.name for n in cluster.layout.workers]
        self.instance_of = {cluster.slurm_name(n.name): n.name for n in cluster.layout.nodes}
        """Slurm (and mailbox) name -> instance name; the same name on the generic platform."""
        self.known_up = {n for n in self.workers if cluster.namespaces.alive(n)}
        self.replaced_at: dict[str, float] = {}
        self.slurm_checked = 0.0
        self.stopping = False

    def log(self, node: str, event: str, **extra: Any) -> None:
        record = {"time": time.time(), "node": node, "event": event, **extra}
        with (agent_dir(self.cluster) / "events.jsonl").open("a") as handle:
            handle.write(json.dumps(record) + "\n")

    def replace(self, name: str, reason: str) -> bool:
        return self.recover(name, REPLACE, reason)

    def recover(self, name: str, action: str, reason: str) -> bool:
        """Reboot or replace (``action``) instance ``name``; True when it came back. Logs before and after."""
        doing, done = ("rebooting", "rebooted") if action == REBOOT else ("replacing", "replaced")
        self.log(name, doing, reason=reason)
        try:
            if action == REBOOT:
                self.cluster.reboot(name)
                code, output = 0, ""
            else:
                code, output = self.cluster.replace(name)
        except LocalClusterError as error:
            code, output = 1, str(error)
        tail = output.strip().splitlines()[-1:] or [""]
        if code == 0:
            self._resume(name)
            self.replaced_at[name] = time.time()
            self.known_up.add(name)
            notice = mailbox_dir(self.cluster) / "replaced" / f"{self.cluster.slurm_name(name)}.json"
            notice.write_text(json.dumps({"time": self.replaced_at[name]}) + "\n")
            notice.chmod(0o644)
        self.log(name, done if code == 0 else f"{action}-failed", exit_code=code, last_line=tail[0])
        return code == 0

    def _controller_exec(self, argv: list[str]) -> str:
        for controller in self.cluster.layout.controllers:
            if self.cluster.namespaces.alive(controller.name):
                try:
                    result = self.cluster.exec(controller.name, argv, timeout=30)
                except (LocalClusterError, subprocess.TimeoutExpired):
                    continue
                if result.returncode == 0:
                    return result.stdout
        return ""

    def _resume(self, name: str) -> None:
        """A node failed or drained for a reboot or replacement comes back to Slurm, as HyperPod returns it."""
        slurm_name = self.cluster.slurm_name(name)
        reasons = self._controller_exec(["sinfo", "-h", "-N", "-n", slurm_name, "-o", "%N|%E"])
        if recovery_requests(reasons):
            self._controller_exec(["scontrol", "update", f"nodename={slurm_name}", "state=resume"])

    def unhealthy(self) -> set[str]:
        return {n for n in self.workers if not self.cluster.namespaces.alive(n)}

    def poll(self) -> None:
        for name in sorted(self.known_up - {n for n in self.known_up if self.cluster.namespaces.alive(n)}):
            self.known_up.discard(name)
            self.replace(name, "instance failed")
        if time.monotonic() - self.slurm_checked >= SLURM_POLL_S:
            self.slurm_checked = time.monotonic()
            for slurm_name, action in recovery_requests(self._controller_exec(["sinfo", "-h", "-N", "-o", "%N|%E"])):
                name = self.instance_of.get(slurm_name, "")
                if name in self.workers:
                    self.recover(name, action, HYPERPOD_REASONS[action])
        self.answer_requests()

    def answer_requests(self) -> None:
        requests, answers = mailbox_dir(self.cluster) / "requests", mailbox_dir(self.cluster) / "answers"
        for path in sorted(requests.glob("[!.]*.json")):
            try:
                asked = parse_request(path.read_text(), self.instance_of)
            except (OSError, AgentRequestError) as error:
                reply: dict[str, Any] = {"action": "NONE", "replaced": [], "error": str(error)}
            else:
                request = Request(asked.job_id, tuple(self.instance_of[n] for n in asked.nodes), asked.step_started)
                todo, done = decide(request, self.replaced_at, self.unhealthy())
                replaced = done + [n for n in todo if self.replace(n, f"job {request.job_id} step failed")]
                reply = answer(self.cluster.slurm_name(n) for n in replaced)
                self.log(",".join(request.nodes), "answered", job_id=request.job_id, **reply)
            temporary = answers / f".{path.name}"
            temporary.write_text(json.dumps(reply) + "\n")
            temporary.chmod(0o644)
            os.replace(temporary, answers / path.name)
            path.unlink(missing_ok=True)

    def run(self) -> None:
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        while not self.stopping:
            self.poll()
            time.sleep(LIVENESS_POLL_S)
