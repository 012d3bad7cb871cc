"""The launcher's checkpoint settings: asynchronous, tiered checkpoints by default, chosen in the batch script and
applied in every rank.

**In the batch script** :func:`environment` adds to what ``launch`` exports (``srun --export=ALL`` takes it to every
rank; a value the job already set is kept):

* :data:`MODE_VARIABLE` ``=sync`` with ``launch --sync-checkpoints`` (the job may also set it itself); unset or
  ``async``, the default: asynchronous saves that block the trainer only while the state is staged. ``sync``:
  today's synchronous ones, on the shared tier only.
* :data:`LOCAL_VARIABLE`: the parent directory of the node-local tier (unset or empty: none). By default the instance
  store where the node's instance type has one and it is mounted (:func:`~training_runtime.checkpoint.
  node_local_root`: EC2's facts of the type, the DLAMI's mount at ``/opt/dlami/nvme``), in its ``tmp`` directory,
  which AWS's lifecycle sample makes 1777 for enroot (users may create their directories there, not in the mount
  itself); none on other types and in containers (the container does not see the host's instance store unless you
  mount it and set the variable).

**In every rank** :func:`checkpointer` builds the :class:`~training_runtime.checkpoint.AsyncCheckpointer` from them.
Before that it checks the staging budget (:mod:`training_runtime.checkpoint.budget`): this rank's
``state_bytes`` x the ranks on the node against half this node's ``MemTotal`` less the OS reserve, and refuses to
start with the numbers when it does not fit. The node-local tier is ``<parent>/hyperpod-cdk-checkpoints-<uid>/
<name>-<digest>``, one per shared checkpoint directory, created 0700 and refused when a link or another user's.

:class:`Stopping` is the examples' end of a step: the Spot watcher's request (``SIGUSR1``) saves the step and flushes
it before the job is requeued; ``SIGTERM`` (``scancel``, a requeue, the time limit, a preemption: Slurm sends it
``KillWait`` seconds before ``SIGKILL``) flushes the save in flight and stops, and kills at once when there is none.

Runs on the node's system Python (3.8 and newer): stdlib only; torch only through the checkpoint package's calls.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import signal
import stat
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, TextIO

from training_runtime.checkpoint import AsyncCheckpointer, StopRequest, any_rank, node_local_root, state_bytes
from training_runtime.checkpoint.budget import MEMINFO, check_node, meminfo_total_bytes
from training_runtime.facts import NodeFacts
from training_runtime.hyperpod_facts import DLAMI_NVME

MODE_VARIABLE = "HYPERPOD_CDK_CHECKPOINT"
LOCAL_VARIABLE = "HYPERPOD_CDK_CHECKPOINT_LOCAL_DIR"
ASYNC, SYNC = "async", "sync"
MODES = (ASYNC, SYNC)
INSTANCE_STORE_DIR = DLAMI_NVME + "/tmp"
"""The node-local tier's parent on an instance with an instance store: the DLAMI's mount, its 1777 ``tmp``."""
USER_DIR = "hyperpod-cdk-checkpoints-{uid}"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class CheckpointSettingsError(ValueError):
    """A bad checkpoint setting in the job's environment; the message says how to fix it."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sync-checkpoints",
        action="store_true",
        help="synchronous checkpoints on the shared file system only (default: asynchronous, node-local tier first)",
    )


def mode_of(env: Mapping[str, str]) -> str:
    mode = env.get(MODE_VARIABLE, "") or ASYNC
    if mode not in MODES:
        raise CheckpointSettingsError(
            "{}={!r}: allowed: {}. Fix: unset it (asynchronous checkpoints), or set it to sync".format(
                MODE_VARIABLE, mode[:40], ", ".join(MODES)
            )
        )
    return mode


def local_tier_parent(instance_type: str, mounts: Optional[Sequence[str]] = None) -> str:
    """:data:`INSTANCE_STORE_DIR` where the type has an instance store and it is mounted (``mounts``: default this
    process's mount table), else ``""`` (no local tier)."""
    if not instance_type or node_local_root(instance_type, "probe", mounts=mounts) is None:
        return ""
    return INSTANCE_STORE_DIR


def environment(
    args: argparse.Namespace,
    env: Mapping[str, str],
    facts: NodeFacts,
    container: bool,
    mounts: Optional[Sequence[str]] = None,
) -> Dict[str, str]:
    """What the launcher exports for the ranks' checkpoints (stage 1, in the batch script): nothing for the default
    (asynchronous, no node-local tier), ``sync`` for ``--sync-checkpoints``, the local tier's parent where the node
    has one. Raises :class:`CheckpointSettingsError` for a bad value the job set itself."""
    mode = SYNC if getattr(args, "sync_checkpoints", False) else mode_of(env)
    result = {MODE_VARIABLE: SYNC} if mode == SYNC else {}
    parent = "" if container or mode == SYNC else local_tier_parent(facts.instance_type, mounts)
    if parent and LOCAL_VARIABLE not in env:
        result[LOCAL_VARIABLE] = parent
    return result


def local_root(shared_root: str, parent: str, uid: int) -> Path:
    """The node-local tier of ``shared_root`` under ``parent``, created: ``<parent>/hyperpod-cdk-checkpoints-<uid>/
    <name>-<digest of the shared path>``. Raises OSError when the user's directory is a link or someone else's."""
    mine = os.path.join(parent, USER_DIR.format(uid=uid))
    with contextlib.suppress(FileExistsError):
        os.mkdir(mine, 0o700)
    info = os.lstat(mine)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
        raise OSError("{} is not a directory of uid {} (a link, or another user's)".format(mine, uid))
    absolute = os.path.abspath(shared_root)
    name = _UNSAFE.sub("_", os.path.basename(absolute.rstrip("/")) or "root")[:64]
    digest = hashlib.sha256(absolute.encode()).hexdigest()[:12]
    path = Path(mine, "{}-{}".format(name, digest))
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def ranks_per_node(env: Mapping[str, str]) -> int:
    """torchrun's ``LOCAL_WORLD_SIZE`` (the ranks on this node), 1 outside torchrun."""
    value = env.get("LOCAL_WORLD_SIZE", "")
    return int(value) if value.isdigit() and int(value) > 0 else 1


def checkpointer(
    root: str,
    state_dict: Any,
    *,
    keep: int = 3,
    keep_local: int = 2,
    env: Optional[Mapping[str, str]] = None,
    meminfo: str = MEMINFO,
    staging_ranks: Optional[int] = None,
    uid: Optional[int] = None,
    out: TextIO = sys.stderr,
) -> AsyncCheckpointer:
    """The checkpointer the launcher's settings ask for, for a state shaped like ``state_dict``.

    Asynchronous (the default): refuses with :class:`~training_runtime.checkpoint.budget.StagingBudgetError` when
    ``state_bytes(state_dict)`` x ``staging_ranks`` (default: the ranks on this node) exceeds this node's staging
    budget; the node-local tier goes under :data:`LOCAL_VARIABLE` when it names a directory this user can use (one
    line on ``out`` says when it cannot, and the saves go to ``root`` only). Synchronous: ``root`` only."""
    env = os.environ if env is None else env
    if mode_of(env) == SYNC:
        return AsyncCheckpointer(root, keep=keep, asynchronous=False)
    ranks = staging_ranks if staging_ranks is not None else ranks_per_node(env)
    check_node(state_bytes(state_dict), ranks, meminfo_total_bytes(meminfo))
    local = None
    parent = env.get(LOCAL_VARIABLE, "")
    if parent:
        try:
            local = local_root(root, parent, os.getuid() if uid is None else uid)
        except OSError as error:
            out.write("checkpoints: no node-local tier ({}); saving to {} only\n".format(error, root))
    return AsyncCheckpointer(root, local_root=local, keep=keep, keep_local=keep_local, asynchronous=True)


SPOT, ENDED = "spot", "ended"


class Stopping:
    """The end of every step in the examples: whether to stop, with the checkpoint made safe first. Create it in
    the main thread of every rank, before the loop.

    ``SIGTERM`` is caught only while a save is in flight (:meth:`check` arms and disarms it from ``ckpt.in_flight``):
    with nothing to flush, a rank dies of it at once, as it did before, even while it waits in a collective for a
    peer on a dead node (a Python handler would only run once that collective returned, so the job would linger until
    ``SIGKILL``). While a save is in flight the rank stays alive, so its writer, in the same Slurm step, is not killed
    with it; at the end of the step it flushes the save and stops."""

    def __init__(self, reduce: Optional[Callable[[bool], bool]] = any_rank) -> None:
        self.reduce = reduce
        self.spot = StopRequest()
        """The Spot watcher's request to checkpoint and stop (``SIGUSR1``)."""
        self.terminated = False
        """``SIGTERM`` arrived while a save was in flight (Slurm ends the step: ``SIGKILL`` follows ``KillWait``
        seconds later)."""
        self.armed = False

    def _terminate(self, signum: int, frame: Any) -> None:
        self.terminated = True

    def arm(self, in_flight: bool) -> None:
        """Catch ``SIGTERM`` while a save is in flight, else leave it to kill the process."""
        if in_flight != self.armed:
            signal.signal(signal.SIGTERM, self._terminate if in_flight else signal.SIG_DFL)
            self.armed = in_flight

    def check(self, ckpt: Any, save: Callable[[], Any], saved: bool) -> Optional[str]:
        """Every rank, every step, after the step's own save (``saved``: this step was just saved). None: go on.
        :data:`SPOT`: the step is saved (``save()`` unless ``saved``) and flushed; requeue the job.
        :data:`ENDED`: the save in flight is flushed; stop."""
        if self.spot.agreed(self.reduce):
            if not saved:
                save()
            ckpt.flush()
            return SPOT
        ended = self.reduce(self.terminated) if self.reduce is not None else self.terminated
        if ended:
            ckpt.flush()
            return ENDED
        self.arm(ckpt.in_flight is not None)
        return None
