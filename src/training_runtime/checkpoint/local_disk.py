"""Where a node's local checkpoint tier goes: the instance store, where the instance type has one and it is mounted.

Facts used:

* Whether a type has an instance store, and whether it is NVMe, is EC2's own description of the type
  (``DescribeInstanceTypes``: ``InstanceStorageSupported`` / ``InstanceStorageInfo``), read from the runtime's
  instance table (:mod:`training_runtime.instance_facts`; each type's ``cited`` names the source and the date).
* Where it is mounted: the HyperPod DLAMI's ``dlami-nvme.service`` mounts it at ``/opt/dlami/nvme``
  (:data:`training_runtime.hyperpod_facts.DLAMI_NVME`, inferred from AWS's lifecycle sample
  ``install_enroot_pyxis.sh``, which waits for that unit and puts enroot's paths there). The function checks the
  mount table, so a type with an instance store on an image that did not mount it gets None.
* That the tier is lost with the node: EC2's instance-store page
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/InstanceStorage.html): "The data in an instance store
  persists only during the lifetime of its associated instance" and "data in the instance store is lost under any
  of the following circumstances: The underlying disk drive fails; The instance stops; The instance hibernates; The
  instance terminates". A node HyperPod replaces is a new instance: resume then reads the shared tier.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from training_runtime.hyperpod_facts import DLAMI_NVME

MOUNTINFO = Path("/proc/self/mountinfo")
CHECKPOINTS_DIR = "checkpoints"


def mount_points(mountinfo: Path = MOUNTINFO) -> Sequence[str]:
    """The mount points of this process's mount namespace; [] when the table cannot be read."""
    try:
        text = mountinfo.read_text()
    except OSError:
        return []
    rows = (line.split() for line in text.splitlines())
    return [fields[4].replace("\\040", " ") for fields in rows if len(fields) > 4]


def has_instance_store(instance_type: str) -> Optional[bool]:
    """Whether EC2 describes ``instance_type`` with instance-store disks; None when the table does not know."""
    from training_runtime.instance_facts import facts_for

    facts = facts_for(instance_type)
    if facts is None or facts.instance_store_disks is None:
        return None
    return facts.instance_store_disks > 0


def node_local_root(
    instance_type: str,
    name: str,
    *,
    mounts: Optional[Sequence[str]] = None,
    mount: str = DLAMI_NVME,
) -> Optional[Path]:
    """``<instance store>/checkpoints/<name>`` where ``instance_type`` has an instance store and it is mounted at
    ``mount``; else None (then save to the shared tier only). ``mounts``: the mount points (default: this
    process's mount table). ``name``: the job's checkpoint name (one directory per job, as under ``root``)."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError("name must be one directory name (the job's), got {!r}".format(name))
    if not has_instance_store(instance_type):
        return None
    found = mount_points() if mounts is None else mounts
    if mount.rstrip("/") not in [m.rstrip("/") or "/" for m in found]:
        return None
    return Path(mount) / CHECKPOINTS_DIR / name
