"""Where enroot and Docker keep their data: the instance store or the shared file system, never the root volume.

Pure functions of a file's text and the node's volumes, used by ``steps/containers.py``.

AWS's lifecycle sample (``install_enroot_pyxis.sh`` in awslabs/awsome-distributed-ai,
``1.architectures/5.sagemaker-hyperpod/LifecycleScripts/base-config/utils``; research note
``docs/research/hyperpod-2026-fidelity.md`` §4) puts enroot's runtime, data and temp paths on ``/opt/dlami/nvme`` when
the DLAMI's instance store is mounted there, else on ``/opt/sagemaker`` (HyperPod's secondary EBS volume), and the cache
on ``/fsx/enroot`` when FSx is mounted; ``install_docker.sh`` moves Docker's ``data-root`` the same way. Users' most
frequent container complaint is enroot's data filling the root volume (awslabs/awsome-distributed-ai issues #427, #187),
and the AMI's own NVMe-aware ``enroot.conf`` must not be overwritten (PR #1218). So: only the four ``ENROOT_*_PATH``
keys below are ours; a value already on a mounted instance-store volume (or, for the cache, on the shared file system)
is kept byte for byte; every other key and line is never touched.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from training_runtime.errors import StepFailed
from training_runtime.files import is_mountpoint
from training_runtime.hyperpod_facts import DLAMI_NVME
from training_runtime.log import log
from training_runtime.node import Node
from training_runtime.retry import NotReady, RetryPolicy
from training_runtime.steps.ami import enroot_paths

SAGEMAKER_VOLUME = "/opt/sagemaker"
"""HyperPod's secondary EBS volume; AWS's sample falls back to it where no instance store is mounted."""
LOCAL_VOLUMES = (DLAMI_NVME, SAGEMAKER_VOLUME)
"""Instance-local volumes off the root volume, in order of preference (AWS's sample's order)."""

RUNTIME, CACHE, DATA, TEMP = "ENROOT_RUNTIME_PATH", "ENROOT_CACHE_PATH", "ENROOT_DATA_PATH", "ENROOT_TEMP_PATH"
OWNED_KEYS = (RUNTIME, CACHE, DATA, TEMP)
"""The enroot.conf keys the runtime may change; any other key is the AMI's or the user's."""
LOCAL_LAYOUT = {
    RUNTIME: "{}/tmp/enroot/user-$(id -u)",
    DATA: "{}/tmp/enroot/data/user-$(id -u)",
    TEMP: "{}/tmp",
    CACHE: "{}/enroot",
}
"""AWS's sample's values on a local volume (``$(id -u)``: enroot expands it per user)."""
SHARED_CACHE = "{}/enroot"
"""The cache on the shared file system (AWS's sample: ``/fsx/enroot``)."""

DOCKER_DAEMON_JSON = "/etc/docker/daemon.json"
DOCKER_DATA_ROOT = "{}/docker/data-root"
"""AWS's ``install_docker.sh``: ``/opt/dlami/nvme/docker/data-root`` or ``/opt/sagemaker/docker/data-root``."""


def local_volume(node: Node) -> Optional[str]:
    """The first of :data:`LOCAL_VOLUMES` that is a mount point now (a directory on the root volume is not one)."""
    return next((v for v in LOCAL_VOLUMES if is_mountpoint(node, v)), None)


DLAMI_NVME_UNIT = "dlami-nvme.service"
"""The DLAMI's unit that mounts the instance store at /opt/dlami/nvme; AWS's sample waits for it before it decides."""
UNIT_DIRS = ("/etc/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system")
NVME_WAIT = RetryPolicy(attempts=None, base_s=1.0, cap_s=5.0, deadline_s=120.0)
"""AWS's sample waits up to 120 s for dlami-nvme.service to be active with status 0."""


def wait_for_instance_store(node: Node) -> None:
    """Before deciding where paths go: where the DLAMI's unit will mount the instance store and has not yet, wait
    until it is done (active with status 0, or failed), as AWS's ``install_enroot_pyxis.sh`` does; then go on either
    way. Deciding earlier would move the AMI's NVMe values to /opt/sagemaker on a slow boot."""
    units = (node.path("{}/{}".format(d, DLAMI_NVME_UNIT)) for d in UNIT_DIRS)
    if is_mountpoint(node, DLAMI_NVME) or not any(unit.is_file() for unit in units):
        return

    def settled() -> None:
        argv = ["systemctl", "show", DLAMI_NVME_UNIT, "--property=ActiveState", "--property=ExecMainStatus"]
        result = node.run(argv, check=False, timeout=30)
        state = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
        active = state.get("ActiveState", "unknown")
        if active == "failed" or (active == "active" and state.get("ExecMainStatus") == "0"):
            return
        raise NotReady("{} is {}".format(DLAMI_NVME_UNIT, active))

    try:
        NVME_WAIT.call(settled, what=DLAMI_NVME_UNIT + " (the instance store's mount)")
    except NotReady as error:
        log("warning", message="{}; deciding enroot's and Docker's paths without it".format(error))


def shared_mount(node: Node) -> Optional[str]:
    """The cluster's shared file system mount path, where the node has one."""
    return node.params.fsx_mount_path.rstrip("/") if node.has_shared_storage else None


def under(value: str, base: str) -> bool:
    return value == base or value.startswith(base.rstrip("/") + "/")


def _cache_ok(value: str, local: Optional[str], shared: Optional[str], choice: str) -> bool:
    on_local = local is not None and under(value, local)
    on_shared = shared is not None and under(value, shared)
    return {"nvme": on_local, "shared": on_shared}.get(choice, on_local or on_shared)


def _cache_target(local: Optional[str], shared: Optional[str], choice: str) -> Optional[str]:
    """``auto``: the instance store, else the shared file system, else ``/opt/sagemaker`` (the small volume AWS's
    issue #427 saw fill up). AWS's sample takes ``/fsx`` whenever it is mounted; the runtime prefers a node-local
    cache on NVMe (faster, and no layer one user writes is read by every node)."""
    on_local = LOCAL_LAYOUT[CACHE].format(local) if local else None
    on_shared = SHARED_CACHE.format(shared) if shared else None
    if choice == "nvme":
        return on_local
    if choice == "shared":
        return on_shared
    return on_local if local == DLAMI_NVME else on_shared or on_local


def enroot_changes(
    current: Dict[str, str], local: Optional[str], shared: Optional[str], cache: str
) -> Tuple[Dict[str, str], List[str]]:
    """(key -> new value for every owned key that is missing or off the allowed volumes, keys that must move but have
    nowhere to go). ``current``: the owned keys the file sets now."""
    changes: Dict[str, str] = {}
    stranded: List[str] = []
    for key in OWNED_KEYS:
        value = current.get(key)
        if key == CACHE:
            if value is not None and _cache_ok(value, local, shared, cache):
                continue
            target = _cache_target(local, shared, cache)
        else:
            if value is not None and local is not None and under(value, local):
                continue
            target = LOCAL_LAYOUT[key].format(local) if local else None
        if target is None:
            stranded.append(key)
        else:
            changes[key] = target
    return changes, stranded


def current_paths(text: str) -> Dict[str, str]:
    """The owned keys an enroot.conf sets, from its first uncommented line for each."""
    found: Dict[str, str] = {}
    for key, value in enroot_paths(text):
        if key in OWNED_KEYS:
            found.setdefault(key, value)
    return found


def tuned_enroot_conf(text: str, changes: Dict[str, str]) -> str:
    """``text`` with each key of ``changes`` set: on the line that sets it (every such line), else on its
    commented-out default line (``#ENROOT_TEMP_PATH ...``, as AWS's sample uncomments it), else appended. Every
    other line is kept as it is."""
    lines = text.splitlines(keepends=True)
    pending = dict(changes)
    for key, value in changes.items():
        active = re.compile(r"^[ \t]*{}[ \t]+".format(key))
        hits = [i for i, line in enumerate(lines) if active.match(line)]
        if not hits:
            commented = re.compile(r"^[ \t]*#[ \t]*{}([ \t]|$)".format(key))
            hits = [i for i, line in enumerate(lines) if commented.match(line)][:1]
        for index in hits:
            lines[index] = "{} {}\n".format(key, value)
        if hits:
            del pending[key]
    out = "".join(lines)
    if pending and out and not out.endswith("\n"):
        out += "\n"
    return out + "".join("{} {}\n".format(k, v) for k, v in pending.items())


def static_dir(value: str) -> str:
    """The directories of a path value before its first ``$`` component (enroot expands those per user)."""
    parts = value.split("/")
    cut = next((i for i, part in enumerate(parts) if "$" in part), len(parts))
    return "/".join(parts[:cut]) or "/"


# --- Docker ---------------------------------------------------------------------------------------------


def docker_config(text: Optional[str], path: str = DOCKER_DAEMON_JSON) -> Dict[str, Any]:
    """daemon.json as a mapping in the file's key order ({} when missing or empty); refuses a file that is not a
    JSON object, rather than replace what someone wrote."""
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as error:
        raise StepFailed(
            "{} is not valid JSON ({}); the runtime never replaces it. Fix: correct the file (or set "
            "runtime.containers.docker_data_root: false)".format(path, error)
        ) from None
    if not isinstance(data, dict):
        raise StepFailed("{}: expected a JSON object, got {}".format(path, type(data).__name__))
    return dict(data)


def docker_data_root(current: Optional[str], local: Optional[str]) -> Optional[str]:
    """The ``data-root`` to set, or None to leave it: kept when on the local volume, None when there is none."""
    if local is None or (current is not None and under(current, local)):
        return None
    return DOCKER_DATA_ROOT.format(local)


def docker_json(config: Dict[str, Any], data_root: str) -> str:
    """The merged daemon.json: ``data-root`` set, every other key kept in its order."""
    merged = dict(config)
    merged["data-root"] = data_root
    return json.dumps(merged, indent=2) + "\n"
