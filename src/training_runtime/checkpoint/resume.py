"""Resume from the newest save every rank can read, each rank from the nearest tier that holds its shard.

Each rank lists the saves it can load its own shard of (:func:`.tiers.candidates`: its node-local copies and the
shared tier's complete checkpoints); the ranks agree on the newest save in every rank's list; each rank loads its
shard from its local copy where it has one (the node survived), else from the shared tier (the node was
replaced and its instance store is gone). A checkpoint ``save_distributed`` wrote (kind ``dcp``) is read too, with
``load_distributed``; one written by ``save`` (``torch.save``), or by a job of another world size, is refused when
it is newer than anything readable, rather than silently skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from training_runtime.checkpoint.collective import agree_max, gather
from training_runtime.checkpoint.layout import DCP, Checkpoint, CheckpointError, shard_files
from training_runtime.checkpoint.shards import read_index, restore
from training_runtime.checkpoint.tiers import SHARED, Candidate, candidates, newest_other, pick

DCP_ID = "dcp"


@dataclass(frozen=True)
class Resumed:
    """What :meth:`AsyncCheckpointer.resume` loaded on this rank."""

    step: int
    tier: str
    """``local`` or ``shared``."""
    checkpoint: Checkpoint

    @property
    def extra(self) -> Dict[str, Any]:
        """The ``extra`` the save was given (e.g. the data position)."""
        value = self.checkpoint.manifest.get("extra")
        return value if isinstance(value, dict) else {}


def resume(
    root: Path, local_root: Optional[Path], state_dict: Dict[str, Any], weights_only: bool = True
) -> Optional[Resumed]:
    """Load the newest complete save into ``state_dict`` in place (every rank calls it); None when there is none."""
    from training_runtime.checkpoint.torch_io import _world

    distributed, rank, world = _world()
    found: Dict[Candidate, Tuple[str, Path]] = candidates(root, local_root, rank, world)
    other = newest_other(root, world)
    if other is not None and other.manifest.get("kind") == DCP:
        found.setdefault((other.step, DCP_ID), (SHARED, other.path))
    lists = gather(sorted(found), distributed, world)
    common = set(lists[0]).intersection(*(set(keys) for keys in lists[1:]))
    choice = pick(sorted(common))
    if other is not None and other.manifest.get("kind") != DCP and (choice is None or other.step > choice[0]):
        raise CheckpointError(
            "the newest complete checkpoint under {} (step {}, kind {}, {} rank(s)) is not one this job can resume "
            "from ({} rank(s), AsyncCheckpointer's shards or save_distributed's dcp). Fix: resume with the tool "
            "and world size that wrote it, or move it aside to start from {}".format(
                root,
                other.step,
                other.manifest.get("kind"),
                other.manifest.get("world_size"),
                world,
                "step {}".format(choice[0]) if choice else "scratch",
            )
        )
    if choice is None:
        return None
    tier, directory = found[choice]
    problem = ""
    resumed: Optional[Resumed] = None
    try:
        resumed = _load(choice, tier, directory, rank, world, state_dict, weights_only)
    except Exception as error:  # every rank must hear of it, or the others wait in the next collective
        problem = "{}: {}".format(type(error).__name__, error)
    if agree_max([1 if problem else 0], distributed)[0]:
        raise CheckpointError(
            "resuming step {} failed: {}".format(choice[0], problem or "on another rank (see its error)")
        )
    return resumed


def _load(
    choice: Candidate,
    tier: str,
    directory: Path,
    rank: int,
    world: int,
    state_dict: Dict[str, Any],
    weights_only: bool,
) -> Resumed:
    from training_runtime.checkpoint.torch_io import load_distributed

    step, save_id = choice
    checkpoint = _checkpoint_at(directory, step)
    if save_id == DCP_ID:
        load_distributed(checkpoint, state_dict)
        return Resumed(step, tier, checkpoint)
    data_name, index_name = shard_files(rank)
    with open(str(directory / index_name), "rb") as handle:
        index = read_index(handle, str(directory / index_name), weights_only)
    header = index["header"]
    if (header.get("rank"), header.get("world_size"), header.get("step")) != (rank, world, step):
        raise CheckpointError(
            "{} holds rank {} of {} at step {}, not rank {} of {} at step {}".format(
                directory / index_name,
                header.get("rank"),
                header.get("world_size"),
                header.get("step"),
                rank,
                world,
                step,
            )
        )
    with open(str(directory / data_name), "rb") as data:
        restore(state_dict, index, data, str(directory / data_name))
    return Resumed(step, tier, checkpoint)


def _checkpoint_at(directory: Path, step: int) -> Checkpoint:
    from training_runtime.checkpoint.layout import _inspect

    manifest, problem = _inspect(directory, step)
    if manifest is None:
        raise CheckpointError("{} is no longer a complete checkpoint: {}".format(directory, problem))
    return Checkpoint(step=step, path=directory, manifest=manifest)
