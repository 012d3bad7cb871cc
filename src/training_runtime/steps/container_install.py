"""Installing enroot and pyxis where the AMI did not (``runtime.containers.install_missing``).

As AWS's lifecycle sample does on older AMIs and bare Ubuntu (``install_enroot_pyxis.sh`` in
awslabs/awsome-distributed-ai, ``1.architectures/5.sagemaker-hyperpod/LifecycleScripts/base-config/utils``; research
note ``docs/research/hyperpod-2026-fidelity.md`` §4), with three differences: every download is checked against a sha256
before it is used (the sample checks none), pyxis comes from a pinned source archive rather than a tag's git clone, and
a piece the node already has is never installed again (the sample's newer revision skips what the DLAMI provides, for
the duplicate registration a second pyxis causes). Pins: ``training_runtime/pins.py``. Downloads and apt are retried
(``apt.download``, ``apt.apt_install``).

* enroot: ``apt-get install`` of its dependencies and the two pinned packages (``enroot``, ``enroot+caps``).
* pyxis: built with the node's own Slurm headers (HyperPod: ``/opt/slurm/include``, as AWS's sample builds it;
  Debian/Ubuntu: ``libslurm-dev``'s ``/usr/include``), ``make install`` into ``/usr/local`` (its plugin at
  ``/usr/local/lib/slurm/spank_pyxis.so``; ``steps/plugstack.py`` registers it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from training_runtime.apt import apt_install, download
from training_runtime.errors import StepFailed
from training_runtime.hyperpod_facts import ENROOT_BIN, PYXIS_PLUGIN_INSTALLED
from training_runtime.node import GENERIC, Node
from training_runtime.paths import STATE_DIR
from training_runtime.pins import (
    ENROOT_DEBS,
    ENROOT_DEPENDENCIES,
    ENROOT_VERSION,
    PYXIS_BUILD_PACKAGES,
    PYXIS_SOURCE,
    PYXIS_VERSION,
    Artifact,
)
from training_runtime.steps import Step
from training_runtime.steps.ami import container_stack

DOWNLOADS = STATE_DIR + "/downloads"
BUILD_DIR = STATE_DIR + "/build"
PYXIS_PREFIX = "/usr/local"
PYXIS_INSTALLED = PYXIS_PLUGIN_INSTALLED
"""Where pyxis's ``make install prefix=/usr/local`` puts the plug-in."""
SLURM_DEV_PACKAGE = "libslurm-dev"
"""Debian's and Ubuntu's Slurm headers (``/usr/include/slurm/spank.h``), as pyxis's install guide names them."""
BUILD_TIMEOUT_S = 900.0


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checksum(node: Node, artifact: Artifact) -> str:
    """The sha256 a download must have: the pin's, else the config's; refuses to go on without one."""
    if artifact.sha256 is not None:
        return artifact.sha256
    value = getattr(node.options.containers, artifact.option) if artifact.option else None
    if value is None:
        raise StepFailed(
            "the pin {!r} in training_runtime/pins.py has no sha256 (none is published that the project could "
            "verify), so {} cannot be checked and is not installed. Fix: set runtime.containers.{} to the sha256 of "
            "that file from a download you trust, or install enroot in the AMI and leave install_missing "
            "false".format(artifact.name, artifact.url, artifact.option)
        )
    return str(value)


def fetch_verified(node: Node, artifact: Artifact) -> Path:
    """The artifact on the node (under :data:`DOWNLOADS`), its sha256 checked; a mismatch is deleted and refused."""
    expected = checksum(node, artifact)
    target = node.path("{}/{}".format(DOWNLOADS, artifact.url.rsplit("/", 1)[1]))
    if target.is_file() and sha256_of(target) == expected:
        return target  # an earlier run downloaded it already
    target.parent.mkdir(parents=True, exist_ok=True)
    download(node, artifact.url, str(target))
    got = sha256_of(target) if target.is_file() else "(no file)"
    if got != expected:
        target.unlink(missing_ok=True)
        raise StepFailed(
            "{}: sha256 {} but the pin {!r} expects {}; refusing it. Fix: check the download source (a proxy or "
            "mirror may serve another file), or correct the sum".format(artifact.url, got, artifact.name, expected)
        )
    return target


def slurm_include_dir(node: Node) -> str:
    """Where the node's Slurm headers are: HyperPod's ``/opt/slurm/include`` (AWS's sample builds against it)."""
    return "/usr/include" if node.platform == GENERIC else node.slurm.conf_dir.rsplit("/", 1)[0] + "/include"


def _safe_extract(archive: Path, into: Path) -> Path:
    """Unpack a source archive whose members all stay under ``into``; returns its top directory."""
    with tarfile.open(str(archive), mode="r:gz") as tar:
        members = tar.getmembers()
        base = os.path.realpath(str(into)) + os.sep
        for member in members:
            path = os.path.join(str(into), member.name)
            targets = [path]
            if member.issym():
                targets.append(os.path.join(os.path.dirname(path), member.linkname))
            elif member.islnk():
                targets.append(os.path.join(str(into), member.linkname))
            if not all(os.path.realpath(t).startswith(base) for t in targets):
                raise StepFailed("{}: member {!r} leaves the build directory; refusing it".format(archive, member.name))
        tops = {m.name.split("/", 1)[0] for m in members}
        if len(tops) != 1:
            raise StepFailed("{}: expected one top directory, found {}".format(archive, ", ".join(sorted(tops))))
        options: Dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(str(into), **options)
    return into / tops.pop()


class ContainerInstall(Step):
    """enroot's pinned packages and pyxis built from its pinned source, each only where the node lacks it."""

    name = "containers-install"

    def missing(self, node: Node) -> List[str]:
        stack = container_stack(node)
        return (["enroot"] if not stack.enroot else []) + (["pyxis"] if not stack.pyxis_plugin else [])

    def needed(self, node: Node) -> bool:
        return bool(self.missing(node))

    def apply(self, node: Node) -> None:
        missing = self.missing(node)
        wanted = (ENROOT_DEBS if "enroot" in missing else ()) + ((PYXIS_SOURCE,) if "pyxis" in missing else ())
        for artifact in wanted:
            checksum(node, artifact)  # a missing sum refuses before anything is downloaded
        if "enroot" in missing:
            packages = [str(fetch_verified(node, artifact)) for artifact in ENROOT_DEBS]
            apt_install(node, [*ENROOT_DEPENDENCIES, *packages])
            if not node.path(ENROOT_BIN).is_file():
                raise StepFailed("apt-get installed the enroot packages but {} is missing".format(ENROOT_BIN))
        if "pyxis" in missing:
            self._build_pyxis(node)

    def _build_pyxis(self, node: Node) -> None:
        source = fetch_verified(node, PYXIS_SOURCE)
        include = slurm_include_dir(node)
        packages = [p for p in PYXIS_BUILD_PACKAGES if not node.which(p)]
        if not node.path(include + "/slurm/spank.h").is_file():
            if node.platform != GENERIC:
                raise StepFailed(
                    "no Slurm headers at {}/slurm/spank.h, which pyxis is built against. Fix: use a HyperPod AMI "
                    "with Slurm's headers, or one that ships pyxis".format(include)
                )
            packages.append(SLURM_DEV_PACKAGE)
        if packages:
            apt_install(node, packages)
        build = node.path(BUILD_DIR)
        if build.exists():
            shutil.rmtree(str(build))  # the runtime's own scratch directory, rebuilt from the verified archive
        build.mkdir(parents=True)
        tree = str(_safe_extract(source, build))
        env = {"CPPFLAGS": "-I{}".format(include)}
        node.run(["make", "-C", tree], env=env, timeout=BUILD_TIMEOUT_S)
        node.run(["make", "-C", tree, "install", "prefix=" + PYXIS_PREFIX], env=env, timeout=BUILD_TIMEOUT_S)
        if not node.path(PYXIS_INSTALLED).is_file():
            raise StepFailed("pyxis's make install did not write {}".format(PYXIS_INSTALLED))

    def describe(self, node: Node) -> List[str]:
        lines = []
        missing = self.missing(node)
        if "enroot" in missing:
            lines.append(
                "download enroot {} packages (sha256-checked), apt-get install {} and them".format(
                    ENROOT_VERSION, " ".join(ENROOT_DEPENDENCIES)
                )
            )
        if "pyxis" in missing:
            lines.append(
                "build pyxis {} (sha256-checked source) against {}, install it into {}".format(
                    PYXIS_VERSION, slurm_include_dir(node), PYXIS_PREFIX
                )
            )
        return lines

    def left_alone(self, node: Node) -> List[str]:
        stack = container_stack(node)
        kept: List[Optional[str]] = [
            ENROOT_BIN if stack.enroot else None,
            stack.pyxis_plugin,
        ]
        return ["{}: already on the node, not installed again".format(k) for k in kept if k] if any(kept) else []
