"""The memory budget of asynchronous checkpoints: may a node stage this many bytes of state in host memory?

An asynchronous save copies the state into host memory first (the staging buffer, pinned and kept between saves)
and the trainer goes on while a background writer drains it. PyTorch's own recipe states the cost: asynchronous
checkpointing "does raise CPU memory by a factor of ``checkpoint_size_per_rank X number_of_ranks``", and "pinned
memory implies the usage of ``page-lock`` memory, which can be scarce as compared to ``pageable`` memory"
(pytorch/tutorials, recipes_source/distributed_async_checkpoint_recipe.rst). NVIDIA's CUDA runtime API says the
same of page-locked allocations: "Page-locking excessive amounts of memory with cudaMallocHost() may degrade system
performance, since it reduces the amount of memory available to the system for paging" (CUDA Runtime API,
cudaMallocHost).

**The share: half of the node's memory less the OS reserve** (:data:`STAGING_SHARE_PERCENT`). The reserve is the
one slurm.conf's ``RealMemory`` already keeps back for the kernel and the node's daemons
(:func:`training_runtime.hardware.usable_memory_mib`: 5 %, at least 1 GiB). Half of the rest, because the staging
buffer is a *second* copy of the state: on a CPU job the live state sits in the same memory, so state + copy must
fit (more than half cannot); on a GPU job the state lives in device memory, but loading a checkpoint
(``torch.load``, DCP's load) and building the model before sharding (the FSDP example holds the full model on every
rank for a moment) need host memory of the same order, and the page cache the writer streams through needs room
too. A pinned buffer cannot be paged out to make that room, so the budget is fixed up front, not left to the OOM
killer in the middle of a run.

Pure functions of numbers (and :func:`meminfo_total_bytes`, which reads ``/proc/meminfo``); stdlib only. Used by
``hyperpod-cdk validate`` (the config's declared ``runtime.checkpoint.state_gib_per_node`` against each group's
instance type) and by the job at start (:mod:`training_runtime.launch_checkpoint`: the actual state's bytes x
ranks per node against this node's ``MemTotal``).
"""

from __future__ import annotations

from dataclasses import dataclass

from training_runtime.checkpoint.layout import CheckpointError
from training_runtime.hardware import usable_memory_mib

STAGING_SHARE_PERCENT = 50
"""The share of a node's memory (less the OS reserve) that the checkpoint staging buffers of all its ranks may
take together; argued in the module's docstring."""
MEMINFO = "/proc/meminfo"
MIB = 1 << 20
GIB = 1 << 30


class StagingBudgetError(CheckpointError):
    """The staging buffer would exceed the node's budget; the message has the numbers and the fixes."""


@dataclass(frozen=True)
class StagingBudget:
    """What one node may stage: :attr:`limit_bytes` = ``share_percent`` of its memory less the OS reserve."""

    memory_bytes: int
    """The node's memory: ``MemTotal``, or EC2's figure for its instance type."""
    share_percent: int = STAGING_SHARE_PERCENT

    @property
    def usable_bytes(self) -> int:
        return usable_memory_mib(self.memory_bytes // MIB) * MIB

    @property
    def limit_bytes(self) -> int:
        return self.usable_bytes * self.share_percent // 100

    def fits(self, staging_bytes: int) -> bool:
        """Whether ``staging_bytes`` (all the node's ranks together) fit the budget."""
        return staging_bytes <= self.limit_bytes

    def describe(self) -> str:
        """The limit with how it is reached, e.g. ``7.6 GiB (50% of MemTotal 16.0 GiB less the OS reserve)``."""
        return "{} ({}% of {} less the OS reserve of {})".format(
            gib(self.limit_bytes),
            self.share_percent,
            gib(self.memory_bytes),
            gib(self.memory_bytes - self.usable_bytes),
        )


def staging_fits(staging_bytes: int, memory_bytes: int, share_percent: int = STAGING_SHARE_PERCENT) -> bool:
    """Whether a node of ``memory_bytes`` may stage ``staging_bytes`` (every rank's buffer together)."""
    return StagingBudget(memory_bytes, share_percent).fits(staging_bytes)


def gib(value: float) -> str:
    return "{:.1f} GiB".format(value / GIB)


FIX = (
    "shard the state over more nodes (FSDP), stage from fewer ranks per node, use an instance type with more "
    "memory, or save synchronously (launch --sync-checkpoints, or HYPERPOD_CDK_CHECKPOINT=sync)"
)


def check_node(per_rank_bytes: int, ranks_per_node: int, memory_bytes: int) -> StagingBudget:
    """The node's budget; raises :class:`StagingBudgetError` with the numbers when ``per_rank_bytes`` x
    ``ranks_per_node`` exceed it."""
    budget = StagingBudget(memory_bytes)
    staging = per_rank_bytes * ranks_per_node
    if not budget.fits(staging):
        raise StagingBudgetError(
            "asynchronous checkpoints would stage {} per node ({} of state per rank x {} ranks), over the "
            "staging budget of {}. Fix: {}".format(
                gib(staging), gib(per_rank_bytes), ranks_per_node, budget.describe(), FIX
            )
        )
    return budget


def meminfo_total_bytes(path: str = MEMINFO) -> int:
    """``MemTotal`` of ``/proc/meminfo`` (``MemTotal:  24567892 kB``) in bytes; ValueError when it has none."""
    with open(path) as handle:
        for line in handle:
            name, _, value = line.partition(":")
            if name == "MemTotal":
                number, _, unit = value.strip().partition(" ")
                if number.isdigit() and unit.strip() in ("kB", ""):
                    return int(number) * (1024 if unit.strip() == "kB" else 1)
    raise ValueError("{}: no MemTotal line".format(path))
