"""NVIDIA: the driver must come with the AMI (checked, never installed); fabric manager (NVSwitch systems
only) and DCGM are installed and started when missing.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from training_runtime.accelerators import Accelerators, detect
from training_runtime.apt import (
    apt_install,
    apt_install_argv,
    apt_update_argv,
)
from training_runtime.errors import StepFailed
from training_runtime.node import Node
from training_runtime.paths import DCGM_BINARY
from training_runtime.services import start_unit, unit_active
from training_runtime.steps import Step

FABRIC_MANAGER_PACKAGE = "nvidia-fabricmanager-{major}"
"""Fabric manager alone. Not ``cuda-drivers-fabricmanager-<major>``: that metapackage also depends on
``cuda-drivers-<major>``, which would let apt replace the AMI's driver (HyperPod's own lifecycle hotfixes
hold the driver packages for exactly that reason). The version is pinned to the running driver's: fabric
manager refuses to start against a different driver version."""
FABRIC_MANAGER_SERVICE = "nvidia-fabricmanager"
FABRIC_MANAGER_BINARY = "nv-fabricmanager"
DCGM_PACKAGE = "datacenter-gpu-manager"
DCGM_SERVICE = "nvidia-dcgm"
DRIVER_QUERY = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]


class NvidiaSoftware(Step):
    """The AMI's driver answers ``nvidia-smi``; fabric manager (NVSwitch only) and DCGM installed and running."""

    name = "nvidia-software"

    def __init__(self, found: Optional[Accelerators] = None) -> None:
        self.found = found

    def _found(self, node: Node) -> Accelerators:
        return self.found if self.found is not None else detect(node)

    def driver(self, node: Node) -> Tuple[Optional[str], str]:
        """(driver version, problem): the version when ``nvidia-smi`` works, else why not."""
        gpus = self._found(node).nvidia_gpus
        if node.which("nvidia-smi") is None:
            return None, (
                "{} NVIDIA GPUs found but nvidia-smi is not installed: the NVIDIA driver must come with the AMI "
                "(this runtime never installs drivers). Fix: use a GPU AMI - HyperPod's default AMI or an AWS "
                "Deep Learning AMI".format(gpus)
            )
        result = node.run(DRIVER_QUERY, check=False, timeout=120)
        versions = sorted({line.strip() for line in result.stdout.splitlines() if line.strip()})
        if not result.ok or not versions:
            return None, (
                "{} NVIDIA GPUs found but `{}` failed (exit {}): {}. The driver is not loaded or a GPU is "
                "unhealthy. Fix: check dmesg for Xid errors; replace the node if it persists".format(
                    gpus, " ".join(DRIVER_QUERY), result.returncode, (result.stdout + result.stderr).strip()[-800:]
                )
            )
        if len(versions) > 1:
            return None, "nvidia-smi reports several driver versions {}; the driver install is broken".format(versions)
        return versions[0], ""

    def fabric_manager_installed(self, node: Node, driver: str) -> bool:
        if node.which(FABRIC_MANAGER_BINARY) is None:
            return False
        result = node.run([FABRIC_MANAGER_BINARY, "--version"], check=False, timeout=60)
        return result.ok and driver in result.stdout

    def dcgm_installed(self, node: Node) -> bool:
        return node.which(DCGM_BINARY) is not None

    def _wants_fabric_manager(self, node: Node) -> bool:
        return self._found(node).nvswitches > 0

    def _state(self, node: Node) -> Dict[str, bool]:
        driver, _ = self.driver(node)
        if driver is None:
            return {"driver": False}
        state = {"driver": True, "dcgm": self.dcgm_installed(node), "dcgm_running": _running(node, DCGM_SERVICE)}
        if self._wants_fabric_manager(node):
            state["fabric_manager"] = self.fabric_manager_installed(node, driver)
            state["fabric_manager_running"] = _running(node, FABRIC_MANAGER_SERVICE)
        return state

    def needed(self, node: Node) -> bool:
        return not all(self._state(node).values())

    def packages(self, node: Node, driver: str) -> List[str]:
        packages = []
        if self._wants_fabric_manager(node) and not self.fabric_manager_installed(node, driver):
            packages.append(fabric_manager_requirement(driver))
        if not self.dcgm_installed(node):
            packages.append(DCGM_PACKAGE)
        return packages

    def apply(self, node: Node) -> None:
        driver, problem = self.driver(node)
        if driver is None:
            raise StepFailed(problem)
        packages = self.packages(node, driver)
        if packages:
            apt_install(node, packages)
        if self._wants_fabric_manager(node):
            if not self.fabric_manager_installed(node, driver):
                raise StepFailed(
                    "{} does not report driver version {} after installing {}; fabric manager must match the "
                    "driver exactly".format(FABRIC_MANAGER_BINARY, driver, fabric_manager_requirement(driver))
                )
            if not _running(node, FABRIC_MANAGER_SERVICE):
                start_unit(node, FABRIC_MANAGER_SERVICE)
        if not self.dcgm_installed(node):
            raise StepFailed("{} is still missing after installing {}".format(DCGM_BINARY, DCGM_PACKAGE))
        if not _running(node, DCGM_SERVICE):
            start_unit(node, DCGM_SERVICE)

    def describe(self, node: Node) -> List[str]:
        driver, problem = self.driver(node)
        if driver is None:
            return ["FAIL: " + problem]
        actions = []
        packages = self.packages(node, driver)
        if packages:
            actions.append(" ".join(apt_update_argv()))
            actions.append(" ".join(apt_install_argv(packages)))
        if self._wants_fabric_manager(node) and not _running(node, FABRIC_MANAGER_SERVICE):
            actions.append("systemctl enable --now " + FABRIC_MANAGER_SERVICE)
        if not _running(node, DCGM_SERVICE):
            actions.append("systemctl enable --now " + DCGM_SERVICE)
        return actions


def fabric_manager_requirement(driver: str) -> str:
    """``nvidia-fabricmanager-535=535.183.01-*``: the package of the driver's branch at the driver's version."""
    major = driver.split(".")[0]
    return "{}={}-*".format(FABRIC_MANAGER_PACKAGE.format(major=major), driver)


def _running(node: Node, unit: str) -> bool:
    """Whether ``unit`` runs; on a node without systemd (a container) the services are not ours to manage,
    so they count as running."""
    return not node.has_systemd or unit_active(node, unit)
