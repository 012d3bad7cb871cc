"""apt, the one way the runtime installs distro packages: non-interactive, waiting for the dpkg lock,
keeping existing config files, retried as a whole."""

from __future__ import annotations

from typing import List, Sequence

from training_runtime.errors import StepFailed
from training_runtime.node import Node
from training_runtime.run import CommandError

APT_ENV = {"DEBIAN_FRONTEND": "noninteractive"}
APT_OPTIONS = [
    "-o",
    "DPkg::Lock::Timeout=300",
    "-o",
    "Dpkg::Options::=--force-confdef",
    "-o",
    "Dpkg::Options::=--force-confold",
]
APT_INSTALL_TIMEOUT_S = 1800.0


def apt_update_argv() -> List[str]:
    return ["apt-get", *APT_OPTIONS, "update"]


def apt_install_argv(packages: Sequence[str], allow_downgrades: bool = False) -> List[str]:
    extra = ["--allow-downgrades"] if allow_downgrades else []
    return ["apt-get", *APT_OPTIONS, "install", "-y", "--no-install-recommends", *extra, *packages]


def apt_install(node: Node, packages: Sequence[str], allow_downgrades: bool = False) -> None:
    """``apt-get update`` then install ``packages``, retried as a whole (mirrors and the dpkg lock flap)."""

    def install() -> None:
        node.run(apt_update_argv(), env=APT_ENV, timeout=600)
        node.run(apt_install_argv(packages, allow_downgrades), env=APT_ENV, timeout=APT_INSTALL_TIMEOUT_S)

    try:
        node.retry.call(install, what="apt-get install " + " ".join(packages), retry_on=(CommandError,))
    except CommandError as error:
        raise StepFailed(
            "apt-get could not install {}: {}. Fix: check the node reaches its apt repositories (NAT or VPC "
            "endpoints) and that the versions exist there".format(", ".join(packages), error)
        ) from None


def installed(node: Node, package: str) -> bool:
    result = node.run(["dpkg-query", "-W", "-f=${Status}", package], check=False, timeout=60)
    return result.ok and result.stdout.strip().endswith("install ok installed")
