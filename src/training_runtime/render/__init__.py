"""Pure generators for Slurm's configuration files: inputs in, file text out, no I/O.

Every node renders the same files from the same inputs, so nodes agree without copying files around;
writing them (owner, mode, atomic replace) is the caller's job. Each renderer validates its inputs and
raises :class:`RenderError` listing every problem at once.
"""

from training_runtime.render.cgroup_conf import render_cgroup_conf
from training_runtime.render.gres_conf import render_gres_conf
from training_runtime.render.hostlist import compress, expand
from training_runtime.render.slurm_conf import RenderError, render_slurm_conf, slurm_conf_problems
from training_runtime.render.slurm_types import Partition, SlurmNode, SlurmSettings
from training_runtime.render.slurmdbd_conf import render_slurmdbd_conf

__all__ = [
    "Partition",
    "RenderError",
    "SlurmNode",
    "SlurmSettings",
    "compress",
    "expand",
    "render_cgroup_conf",
    "render_gres_conf",
    "render_slurm_conf",
    "render_slurmdbd_conf",
    "slurm_conf_problems",
]
