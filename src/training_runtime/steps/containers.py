"""Containers on every node (``runtime.containers``): enroot and pyxis for ``srun --container-image``, and Docker.

Most of AWS's HyperPod Slurm samples run their jobs in containers through pyxis and enroot, and HyperPod's Slurm AMI
ships "Docker, Enroot, Pyxis" since 2026-05 (``docs/research/hyperpod-2026-fidelity.md`` §2, §4; third-party
summaries of AWS's What's New posts). What users get wrong (same note, §3 "Containers"): enroot's data filling the
small root volume (awslabs/awsome-distributed-ai #427, #187), a lifecycle script overwriting the AMI's NVMe-aware
``enroot.conf`` (PR #1218), a wildcard ``plugstack.conf`` include that configless Slurm cannot expand, and no
``ConstrainDevices`` (NVIDIA/pyxis#47). The steps, in plan order:

* ``containers-install`` (only with ``install_missing``): ``steps/container_install.py``.
* ``enroot-paths``: enroot's runtime, data, temp and cache paths off the root volume (``steps/container_paths.py``),
  editing only those four keys of ``/etc/enroot/enroot.conf`` and only where their value is not already on an
  instance-store volume (or the shared file system, for the cache); the directories it names are created 1777 when
  missing, as AWS's sample does.
* ``docker-data-root``: Docker's ``data-root`` in ``/etc/docker/daemon.json``, the same way; other keys kept.
* ``pyxis-plugstack``, ``cgroup-constrain-devices`` and, on HyperPod's controller, ``containers-configless-push``:
  ``steps/plugstack.py``.

What the AMI set up is read through ``steps/ami.py`` (:func:`~training_runtime.steps.ami.container_stack`), the one
definition of what is installed. Nothing here deletes a file or a directory.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from training_runtime.errors import StepFailed
from training_runtime.files import read_text, write_file
from training_runtime.hyperpod_facts import ENROOT_BIN, ENROOT_CONF
from training_runtime.node import GENERIC, Node
from training_runtime.paths import STATE_DIR
from training_runtime.steps import Step
from training_runtime.steps.ami import container_stack
from training_runtime.steps.configless import ConfiglessPush
from training_runtime.steps.container_install import ContainerInstall
from training_runtime.steps.container_paths import (
    DOCKER_DAEMON_JSON,
    LOCAL_LAYOUT,
    LOCAL_VOLUMES,
    OWNED_KEYS,
    SHARED_CACHE,
    current_paths,
    docker_config,
    docker_data_root,
    docker_json,
    enroot_changes,
    local_volume,
    shared_mount,
    static_dir,
    tuned_enroot_conf,
    wait_for_instance_store,
)
from training_runtime.steps.plugstack import INCLUDE, PYXIS_CONF, CgroupDevices, PyxisPlugstack, has_wildcard
from training_runtime.user_files import Refused, make_dirs

SHARED_DIR_MODE = 0o1777
"""AWS's sample makes enroot's directories world-writable with the sticky bit: every user's enroot writes there."""
PUSH_PENDING = STATE_DIR + "/containers-push.pending"
"""Written on HyperPod's controller before plugstack.conf or cgroup.conf change; the push removes it."""


class EnrootPaths(Step):
    """The four ``ENROOT_*_PATH`` keys off the root volume; every other line of enroot.conf kept as it is."""

    name = "enroot-paths"

    def _state(self, node: Node) -> Tuple[Optional[str], Dict[str, str], List[str], Dict[str, str]]:
        """(enroot.conf's text, key -> new value, keys with nowhere to go, the owned keys it sets now)."""
        text = read_text(node, ENROOT_CONF)
        if text is None and not node.path(ENROOT_BIN).is_file():
            return None, {}, [], {}
        current = current_paths(text or "")
        changes, stranded = enroot_changes(
            current, local_volume(node), shared_mount(node), node.options.containers.enroot_cache
        )
        return text, changes, stranded, current

    def _dirs(self, node: Node, values: Dict[str, str]) -> List[str]:
        """The directories our values name that do not exist yet (only values the runtime's layout gives)."""
        local, shared = local_volume(node), shared_mount(node)
        ours = {LOCAL_LAYOUT[k].format(local) for k in OWNED_KEYS if local}
        ours |= {SHARED_CACHE.format(shared)} if shared else set()
        wanted = sorted({static_dir(v) for v in values.values() if v in ours})
        return [d for d in wanted if not node.path(d).is_dir()]

    def needed(self, node: Node) -> bool:
        _, changes, _, current = self._state(node)
        return bool(changes) or bool(self._dirs(node, current))

    def apply(self, node: Node) -> None:
        wait_for_instance_store(node)
        text, changes, _, current = self._state(node)
        if changes:
            target = node.path(ENROOT_CONF)
            mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
            write_file(node, ENROOT_CONF, tuned_enroot_conf(text or "", changes), mode=mode)
        for directory in self._dirs(node, {**current, **changes}):
            try:  # below a 1777 directory a user may have planted a link: never followed (user_files.py)
                make_dirs(str(node.root), directory, SHARED_DIR_MODE)
            except Refused as refusal:
                raise StepFailed(str(refusal)) from None

    def describe(self, node: Node) -> List[str]:
        _, changes, _, current = self._state(node)
        lines = [
            "set {} {} in {} (was {})".format(key, value, ENROOT_CONF, current.get(key, "unset"))
            for key, value in changes.items()
        ]
        return lines + ["create {} (1777)".format(d) for d in self._dirs(node, {**current, **changes})]

    def left_alone(self, node: Node) -> List[str]:
        text, changes, stranded, current = self._state(node)
        if text is None and not changes:
            return []
        kept = [
            "{} {} kept".format(k, current[k])
            for k in OWNED_KEYS
            if k in current and k not in changes and k not in stranded
        ]
        if stranded:
            kept.append(
                "WARNING: {} not moved: no instance store is mounted ({}){}; enroot may write to the root "
                "volume".format(
                    ", ".join(stranded),
                    ", ".join(LOCAL_VOLUMES),
                    "" if shared_mount(node) else " and no shared file system",
                )
            )
        return kept


class DockerDataRoot(Step):
    """Docker's ``data-root`` on the instance store; daemon.json's other keys kept; docker restarted if it runs."""

    name = "docker-data-root"

    def _wanted(self, node: Node) -> Optional[Tuple[str, str]]:
        """(new daemon.json, new data-root), or None when nothing is to change."""
        config = docker_config(read_text(node, DOCKER_DAEMON_JSON))
        current = config.get("data-root")
        target = docker_data_root(current if isinstance(current, str) else None, local_volume(node))
        return None if target is None else (docker_json(config, target), target)

    def needed(self, node: Node) -> bool:
        return self._wanted(node) is not None

    def apply(self, node: Node) -> None:
        wait_for_instance_store(node)
        wanted = self._wanted(node)
        if wanted is None:
            return
        write_file(node, DOCKER_DAEMON_JSON, wanted[0])
        if node.has_systemd and node.run(["systemctl", "is-active", "--quiet", "docker"], check=False).ok:
            node.run(["systemctl", "restart", "docker"], timeout=300)

    def describe(self, node: Node) -> List[str]:
        wanted = self._wanted(node)
        if wanted is None:
            return []
        return [
            "set data-root {} in {} (other keys kept); restart docker if it runs".format(wanted[1], DOCKER_DAEMON_JSON)
        ]

    def left_alone(self, node: Node) -> List[str]:
        config = docker_config(read_text(node, DOCKER_DAEMON_JSON))
        if "data-root" in config and self._wanted(node) is None:
            return ["docker data-root {} kept".format(config["data-root"])]
        if local_volume(node) is None:
            return ["docker data-root not moved: no instance store is mounted ({})".format(", ".join(LOCAL_VOLUMES))]
        return []


class ContainersPush(ConfiglessPush):
    """``scontrol reconfigure`` after ``pyxis-plugstack`` or ``cgroup-constrain-devices`` changed the controller's
    files, so HyperPod's configless nodes get them (as ``slurm-configless-push`` does for accounting.conf)."""

    name = "containers-configless-push"

    @property
    def _digest_file(self) -> str:
        return STATE_DIR + "/containers-push.digest"

    def needed(self, node: Node) -> bool:
        return node.path(PUSH_PENDING).exists()

    def apply(self, node: Node) -> None:
        super().apply(node)
        node.path(PUSH_PENDING).unlink()


def pushes(node: Node) -> bool:
    """Whether this node's Slurm files reach other nodes through slurmctld (HyperPod's controller, configless)."""
    return node.is_controller and node.platform != GENERIC


def mark_push(node: Node) -> None:
    """Before a step changes a file slurmctld serves to configless nodes: remember to push it."""
    if pushes(node):
        write_file(node, PUSH_PENDING, "pending\n", mode=0o600)


class PushingPlugstack(PyxisPlugstack):
    def apply(self, node: Node) -> None:
        mark_push(node)
        super().apply(node)


class PushingCgroup(CgroupDevices):
    def apply(self, node: Node) -> None:
        mark_push(node)
        super().apply(node)


def _wildcard_plugstack(node: Node) -> bool:
    text = read_text(node, node.slurm.conf_dir + "/plugstack.conf") or ""
    return any(m is not None and has_wildcard(m.group(1)) for m in map(INCLUDE.match, text.splitlines()))


def container_steps(node: Node) -> List[Step]:
    """This node's container steps, before its Slurm daemons start (none with ``containers.enabled: false``)."""
    options = node.options.containers
    if not options.enabled:
        return []
    stack = container_stack(node)
    install = options.install_missing
    steps: List[Step] = [ContainerInstall()] if install else []
    if install or stack.enroot or stack.enroot_conf is not None:
        steps.append(EnrootPaths())
    if options.docker_data_root and stack.docker:
        steps.append(DockerDataRoot())
    if install or stack.pyxis_plugin or _wildcard_plugstack(node):
        steps.append(PushingPlugstack())
    if pushes(node) and (install or not stack.empty or stack.pyxis_registered):
        steps.append(PushingCgroup())
    return steps


def container_push_steps(node: Node) -> List[Step]:
    """After slurmctld runs on HyperPod's controller: send a changed plugstack.conf or cgroup.conf to configless
    nodes."""
    if not node.options.containers.enabled or not pushes(node):
        return []
    conf = node.slurm.conf_dir
    return [ContainersPush([conf + "/plugstack.conf", conf + "/cgroup.conf", "{}/{}".format(conf, PYXIS_CONF)])]
