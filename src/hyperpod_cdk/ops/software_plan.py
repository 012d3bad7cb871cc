"""``update-software``'s decisions, without AWS or Slurm: which groups in which order, what the API allows on Slurm,
when a drained group may be updated, and the progress record that ``--resume`` continues from.

On Slurm an update cannot be rolled in batches within a group: "Updating your cluster in batches is available only
for HyperPod clusters integrated with Amazon EKS" (https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ami-update.html).
UpdateClusterSoftware re-images every node of the instance groups it names, so the command rolls group by group.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hyperpod_cdk.aws.errors import Exit, OpsError
from training_runtime.slurm_text import SlurmTextError, job_id, split_line
from training_runtime.slurm_text import value as slurm_value

AMI_UPDATE_PAGE = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ami-update.html"
BATCHES_EKS_ONLY = (
    "Updating your cluster in batches is available only for HyperPod clusters integrated with Amazon EKS."
)
BATCH_OPTIONS = {
    "batch": "--batch",
    "batch_percent": "--batch-percent",
    "wait_seconds": "--wait-seconds",
    "rollback_alarm": "--rollback-alarm",
}
"""UpdateClusterSoftware's DeploymentConfig (MaximumBatchSize by count or percentage, WaitIntervalInSeconds,
AutoRollbackConfiguration): the command takes them only to refuse them on Slurm, with AWS's words."""
STATE_DIR = ".hyperpod-cdk/update-software"
"""Under the home directory: one progress record per cluster (``<cluster>.json``)."""
DONE = "done"
PHASES = ("pending", "draining", "updating", "verifying", DONE)
"""A group's phases in order; a run that stops leaves the group in the phase it stopped in, and ``--resume`` starts
there. ``updating`` is recorded once UpdateClusterSoftware was accepted (with the time it was sent), so a resumed run
never sends it twice for a group: it waits for that update instead."""


def refuse_batches(args: argparse.Namespace) -> None:
    """An error quoting AWS when a deployment-config option is given (every cluster here is Slurm-orchestrated)."""
    given = [flag for name, flag in BATCH_OPTIONS.items() if getattr(args, name, None) not in (None, [])]
    if given:
        raise OpsError(
            f'{", ".join(given)}: not on a Slurm cluster: "{BATCHES_EKS_ONLY}" ({AMI_UPDATE_PAGE}). An update '
            "re-images every node of each group it names; update-software rolls group by group instead (split a "
            "group's nodes into several groups to roll them in smaller steps). Leave the option out",
            Exit.UNSUPPORTED,
        )


def parse_duration(text: str, flag: str) -> float:
    """'30m' -> 1800.0; a plain number is seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd]?)", text.strip())
    if not match:
        raise OpsError(f"{flag} {text!r}: give a number and a unit s, m, h or d (90s, 30m, 2h)", Exit.USAGE)
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def order_groups(all_groups: Sequence[str], slurm_groups: set[str], named: str | None) -> list[str]:
    """The groups to update, in order. ``named`` (``--groups a,b``): those, in the order given, each once; an
    unknown one is an error. Default: every group whose nodes are Slurm nodes (compute groups), in the cluster's
    order; controller and login groups only when named (their nodes cannot be drained through Slurm)."""
    if not named:
        chosen = [g for g in all_groups if g in slurm_groups]
        if not chosen:
            raise OpsError("no instance group has Slurm nodes to update: name the groups with --groups", Exit.USAGE)
        return chosen
    chosen = list(dict.fromkeys(g.strip() for g in named.split(",") if g.strip()))
    unknown = [g for g in chosen if g not in all_groups]
    if unknown or not chosen:
        raise OpsError(
            f"--groups {named!r}: no instance group {unknown[0] if unknown else named!r} (groups: "
            f"{', '.join(all_groups)})",
            Exit.USAGE,
        )
    return chosen


JOB_FIELDS = ("JobID", "HetJobID", "State", "Requeue", "BatchFlag")
"""What ``update-software`` reads of the jobs on drained nodes (``squeue -O``, :mod:`training_runtime.slurm_text`):
fields only Slurm writes, never the job's name, comment or paths. squeue(1): ``JobID`` "will have a unique value
for each element of job arrays and each component of heterogeneous jobs"; ``HetJobID`` is the "Job ID of the
heterogeneous job leader" (``N/A`` for other jobs); ``Requeue`` and ``BatchFlag`` print 0 or 1."""


@dataclass(frozen=True)
class Job:
    """A job on the nodes being drained (one line of :data:`JOB_FIELDS`)."""

    id: str
    """The id ``scontrol requeue`` takes: a heterogeneous job's leader for its components (Slurm's
    heterogeneous_jobs.html: requeue "can only be requested for a [heterogeneous] job leader and will be applied
    to all components"; a request for one component "will return an error")."""
    state: str
    requeue: bool
    """``Requeue=1`` and a batch job (``BatchFlag=1``): ``scontrol requeue`` puts it back in the queue (every
    component, for a heterogeneous job)."""


def parse_jobs(text: str) -> list[Job]:
    """The jobs in ``squeue -h -O`` output of :data:`JOB_FIELDS`, one per job (a heterogeneous job once, under its
    leader's id). A line that is not that form, or an id that is not a job id, is an error: nothing Slurm did not
    write goes on a command line."""
    jobs: dict[str, Job] = {}
    for line in text.splitlines():
        try:
            fields = split_line(line, len(JOB_FIELDS))
            if fields is None:
                continue
            own, leader, state, requeue, batch = fields
            own_id = job_id(own)
            target = job_id(slurm_value(leader) or own_id)
        except SlurmTextError as error:
            said = f"on the controller, squeue printed a job line update-software cannot read: {error}"
            raise OpsError(said, Exit.FAILED) from None
        requeueable = requeue == "1" and batch == "1"
        seen = jobs.get(target)
        jobs[target] = Job(target, state, requeueable and (seen is None or seen.requeue))
    return list(jobs.values())


@dataclass(frozen=True)
class Drain:
    """What to do about a drained group's jobs now: ``update`` (none left), ``wait``, ``requeue`` these ids (the
    deadline passed and they can be requeued), or ``stop`` (the deadline passed and these cannot be)."""

    action: str
    jobs: tuple[str, ...] = ()


def drain_decision(jobs: Sequence[Job], now: float, deadline: float) -> Drain:
    if not jobs:
        return Drain("update")
    if now < deadline:
        return Drain("wait", tuple(j.id for j in jobs))
    requeue = tuple(j.id for j in jobs if j.requeue)
    if requeue:
        return Drain("requeue", requeue)
    return Drain("stop", tuple(j.id for j in jobs))


@dataclass
class Progress:
    """One cluster's update: its groups in order and each group's phase; written after every change of phase."""

    cluster: str
    groups: list[str]
    image_id: str | None = None
    phases: dict[str, str] = field(default_factory=dict)
    requested_at: dict[str, float] = field(default_factory=dict)
    """When UpdateClusterSoftware was sent for a group (nodes updated after it count as updated)."""
    verified: dict[str, list[str]] = field(default_factory=dict)
    """The Slurm nodes the verification job ran on, by group."""
    note: str = ""

    def phase(self, group: str) -> str:
        return self.phases.get(group, "pending")

    @property
    def finished(self) -> bool:
        return all(self.phase(g) == DONE for g in self.groups)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def progress_path(home: Path, cluster: str) -> Path:
    return home / STATE_DIR / f"{cluster}.json"


def load_progress(path: Path) -> Progress | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise OpsError(f"{path}: not an update-software progress record ({error}); remove it", Exit.USAGE) from None
    return Progress(**data)


def save_progress(path: Path, progress: Progress) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(progress.as_json(), indent=2, sort_keys=True) + "\n")
    os.replace(temporary, path)


def start_or_resume(
    path: Path, cluster: str, groups: list[str], image_id: str | None, resume: bool, named: bool
) -> Progress:
    """The progress to run: a fresh one, or with ``--resume`` the record of the interrupted run (its groups and
    image; ``--groups`` must then name the same groups). An unfinished record without ``--resume`` is an error:
    starting again would update its finished groups a second time."""
    found = load_progress(path)
    if resume:
        if found is None:
            raise OpsError(f"--resume: no update of {cluster} to resume ({path} does not exist)", Exit.NOT_FOUND)
        if named and groups != found.groups:
            raise OpsError(
                f"--resume: the interrupted update covers groups {','.join(found.groups)}; resume it without "
                "--groups (or with the same groups)",
                Exit.USAGE,
            )
        return found
    if found is not None and not found.finished:
        done = [g for g in found.groups if found.phase(g) == DONE] or ["none"]
        raise OpsError(
            f"an update of {cluster} is unfinished (groups done: {', '.join(done)}; {path}): pass --resume to "
            "continue it, or remove that file to start over",
            Exit.USAGE,
        )
    return Progress(cluster, groups, image_id)
