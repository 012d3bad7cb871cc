"""How the runtime installs software: apt (non-interactive, waiting for the dpkg lock, keeping existing
config files, retried as a whole), HTTPS downloads, and the installed versions of packages."""

from __future__ import annotations

from typing import List, Optional, Sequence

from training_runtime.errors import StepFailed
from training_runtime.node import Node
from training_runtime.run import CommandError, Result

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


# --- downloads and installed versions -----------------------------------------------------------------

DOWNLOAD_TIMEOUT_S = 900.0


def curl_argv(url: str, output: Optional[str] = None) -> List[str]:
    """HTTPS only, fail on HTTP errors; to ``output`` or to stdout."""
    argv = ["curl", "--fail", "--silent", "--show-error", "--location", "--proto", "=https", "--max-time", "600"]
    return argv + (["--output", output] if output else []) + [url]


def download(node: Node, url: str, output: Optional[str] = None) -> Result:
    try:
        return node.retry.call(
            lambda: node.run(curl_argv(url, output), timeout=DOWNLOAD_TIMEOUT_S),
            what="download " + url,
            retry_on=(CommandError,),
        )
    except CommandError as error:
        if error.returncode == 127:
            raise StepFailed("curl is not installed; it is needed to download {}".format(url)) from None
        raise StepFailed(
            "could not download {}: {}. Fix: the node needs outbound HTTPS (NAT gateway) to fetch it".format(url, error)
        ) from None


def package_version(node: Node, package: str) -> Optional[str]:
    """The installed version of a Debian package, or None when it is not installed."""
    result = node.run(["dpkg-query", "-W", "-f=${Status}|${Version}", package], check=False, timeout=60)
    status, _, version = result.stdout.strip().partition("|")
    if not result.ok or not status.endswith("install ok installed") or not version:
        return None
    return version


def version_matches(installed: Optional[str], pinned: str) -> bool:
    """``2.26.10.0-ab12cd`` matches the pin ``2.26.10.0``; ``2.26.10.01`` and ``2.26.10.0.1`` do not."""
    if installed is None or not installed.startswith(pinned):
        return False
    rest = installed[len(pinned) :]
    return rest == "" or rest[0] in "-~+"
