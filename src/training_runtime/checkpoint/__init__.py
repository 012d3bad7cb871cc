"""Atomic checkpoints on shared storage (FSx for Lustre or any POSIX file system): never resume from a partial one.

Layout under ``root`` (one training job writes to a root at a time)::

    step_000000120/        a complete checkpoint: its data files and manifest.json
    step_000000140.tmp/    a save in progress, or one a crash interrupted: never read, removed by the next save
    step_000000120.old/    the previous copy of a step while it is being saved again (see ``_publish``)
    latest                 the name of the most recently published checkpoint, for people and other tools

A save writes everything into ``step_<N>.tmp``, fsyncs the files, writes and fsyncs ``manifest.json`` (sizes of
every data file), renames the directory to ``step_<N>`` (atomic within one file system), fsyncs ``root``, moves the
``latest`` pointer (temporary file + ``os.replace``), and only then deletes checkpoints beyond ``keep``. Readers do
not trust the pointer: :func:`latest` scans for the highest step whose manifest checks out against the files on
disk, so a kill at any point leaves the previous complete checkpoint readable.

:class:`AsyncCheckpointer` saves without stopping training: the trainer blocks only while its state is copied
into host memory; a writer process writes and publishes it, first on a node-local tier, then on ``root``
(docs/training.md, "Asynchronous, tiered checkpoints").

``torch`` is imported inside the functions that need it: the package imports on nodes without torch.
"""

from training_runtime.checkpoint.async_save import POLICIES, SKIP, WAIT, AsyncCheckpointer
from training_runtime.checkpoint.budget import STAGING_SHARE_PERCENT, StagingBudget, StagingBudgetError, staging_fits
from training_runtime.checkpoint.interrupt import CHECKPOINT_SIGNAL, StopRequest, any_rank, requeue_job
from training_runtime.checkpoint.jobs import STAGES, Breakpoints
from training_runtime.checkpoint.layout import (
    DCP,
    DCP_METADATA,
    DELETING,
    FORMAT,
    MANIFEST,
    OLD,
    POINTER,
    REQUIRED_FILE,
    SHARDS,
    STATE_FILE,
    TMP,
    TORCH_SAVE,
    Checkpoint,
    CheckpointError,
    complete_checkpoints,
    latest,
    shard_files,
    step_name,
)
from training_runtime.checkpoint.local_disk import has_instance_store, node_local_root
from training_runtime.checkpoint.resume import Resumed
from training_runtime.checkpoint.shards import state_bytes
from training_runtime.checkpoint.torch_io import load, load_distributed, save, save_distributed

__all__ = [
    "CHECKPOINT_SIGNAL",
    "DCP",
    "DCP_METADATA",
    "DELETING",
    "FORMAT",
    "MANIFEST",
    "OLD",
    "POINTER",
    "POLICIES",
    "REQUIRED_FILE",
    "SHARDS",
    "SKIP",
    "STAGES",
    "STAGING_SHARE_PERCENT",
    "STATE_FILE",
    "TMP",
    "TORCH_SAVE",
    "WAIT",
    "AsyncCheckpointer",
    "Breakpoints",
    "Checkpoint",
    "CheckpointError",
    "Resumed",
    "StagingBudget",
    "StagingBudgetError",
    "StopRequest",
    "any_rank",
    "complete_checkpoints",
    "has_instance_store",
    "latest",
    "load",
    "load_distributed",
    "node_local_root",
    "requeue_job",
    "save",
    "save_distributed",
    "shard_files",
    "staging_fits",
    "state_bytes",
    "step_name",
]
