"""EFA: libfabric with the ``efa`` provider (and the aws-ofi-nccl plugin on NVIDIA nodes), installed from the
pinned, signature-checked EFA installer, and ``kernel.yama.ptrace_scope = 0`` for libfabric's shared-memory transport.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import List, Optional

from training_runtime.accelerators import Accelerators, detect
from training_runtime.apt import (
    download,
)
from training_runtime.errors import StepFailed
from training_runtime.files import file_matches, read_text, write_file
from training_runtime.log import log
from training_runtime.node import Node
from training_runtime.paths import FI_INFO
from training_runtime.pins import EFA_INSTALLER_VERSION
from training_runtime.run import CommandError
from training_runtime.steps import Step

EFA_INSTALLER_URL = "https://efa-installer.amazonaws.com"
EFA_KEY_URL = EFA_INSTALLER_URL + "/aws-efa-installer.key"
EFA_KEY_FINGERPRINT = "4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC"
"""The EFA installer's signing key, as the EC2 user guide publishes it (``4E90 91BC ... DD2D 3CCC``).

Verification choice: the GPG signature, not a checksum. The key is fetched from the same host as the
tarball, so the fetched key proves nothing by itself; what is trusted is this pinned fingerprint, checked
against the ``VALIDSIG`` line gpg prints for the tarball's detached signature. A checksum would have to be
pinned per installer version (the EC2 guide lists them); the fingerprint holds across versions.
"""
EFA_INSTALL_TIMEOUT_S = 3600.0
OFI_NCCL_DIRS = ("/opt/amazon/ofi-nccl", "/opt/aws-ofi-nccl")
"""Where the aws-ofi-nccl plugin lives: the EFA installer's location (1.39+), then older DLAMIs'."""
PTRACE_SYSCTL_FILE = "/etc/sysctl.d/99-hyperpod-cdk-efa.conf"
"""Sorted after Ubuntu's 10-ptrace.conf, which sets 1; our own file, so dpkg never prompts about it."""
PTRACE_SYSCTL = (
    "# Managed by hyperpod-cdk: libfabric's shared-memory transport (EFA) needs this.\nkernel.yama.ptrace_scope = 0\n"
)
PTRACE_PROC = "/proc/sys/kernel/yama/ptrace_scope"


def efa_tarball_name(version: str = EFA_INSTALLER_VERSION) -> str:
    return "aws-efa-installer-{}.tar.gz".format(version)


def fi_info_argv() -> List[str]:
    return [FI_INFO, "-p", "efa", "-t", "FI_EP_RDM"]


class EfaSoftware(Step):
    """libfabric's ``efa`` provider works (and aws-ofi-nccl is there on NVIDIA nodes); ptrace is open.

    An AMI that already ships a working EFA stack (HyperPod's do) is left alone: the installer runs only
    when ``fi_info -p efa`` fails or lists no efa provider, not to move a working node to the pinned version.
    """

    name = "efa-software"

    def __init__(self, found: Optional[Accelerators] = None) -> None:
        self.found = found

    def _found(self, node: Node) -> Accelerators:
        return self.found if self.found is not None else detect(node)

    def provider_ok(self, node: Node) -> bool:
        if not node.path(FI_INFO).is_file():
            return False
        result = node.run(fi_info_argv(), check=False, timeout=120)
        return result.ok and "provider: efa" in result.stdout

    def plugin_missing(self, node: Node) -> bool:
        return self._found(node).nvidia_gpus > 0 and not any(node.path(d).is_dir() for d in OFI_NCCL_DIRS)

    def software_needed(self, node: Node) -> bool:
        return not self.provider_ok(node) or self.plugin_missing(node)

    def ptrace_needed(self, node: Node) -> bool:
        if not file_matches(node, PTRACE_SYSCTL_FILE, PTRACE_SYSCTL, mode=0o644):
            return True
        current = read_text(node, PTRACE_PROC)
        return current is not None and current.strip() != "0"

    def needed(self, node: Node) -> bool:
        return self.software_needed(node) or self.ptrace_needed(node)

    def apply(self, node: Node) -> None:
        if self.software_needed(node):
            self.install(node)
        if self.ptrace_needed(node):
            write_file(node, PTRACE_SYSCTL_FILE, PTRACE_SYSCTL, mode=0o644)
            if node.path(PTRACE_PROC).exists():
                node.run(["sysctl", "-w", "kernel.yama.ptrace_scope=0"], timeout=60)

    def install(self, node: Node) -> None:
        scratch = node.path("/var/tmp")
        scratch.mkdir(parents=True, exist_ok=True)
        host_dir = tempfile.mkdtemp(prefix="hyperpod-cdk-efa-", dir=str(scratch))
        work = "/" + os.path.relpath(host_dir, str(node.root))
        try:
            output = self._install_from(node, work)
        finally:
            shutil.rmtree(host_dir, ignore_errors=True)
        self._verify(node, output)

    def _install_from(self, node: Node, work: str) -> str:
        """Download, verify, extract and run the installer; returns its output when it exited non-zero."""
        tarball = "{}/{}".format(work, efa_tarball_name())
        key = work + "/aws-efa-installer.key"
        home = work + "/gnupg"
        download(node, EFA_KEY_URL, key)
        download(node, "{}/{}".format(EFA_INSTALLER_URL, efa_tarball_name()), tarball)
        download(node, "{}/{}.sig".format(EFA_INSTALLER_URL, efa_tarball_name()), tarball + ".sig")
        os.mkdir(str(node.path(home)), 0o700)
        try:
            node.run(["gpg", "--batch", "--homedir", home, "--import", key], timeout=120)
            verify = node.run(
                ["gpg", "--batch", "--homedir", home, "--status-fd", "1", "--verify", tarball + ".sig", tarball],
                check=False,
                timeout=300,
            )
        except CommandError as error:
            if error.returncode == 127:
                raise StepFailed(
                    "gpg is needed to verify the EFA installer's signature and is not installed. Fix: use an "
                    "AMI with gnupg (Ubuntu server images have it)"
                ) from None
            raise
        if not (verify.ok and signed_by(verify.stdout, EFA_KEY_FINGERPRINT)):
            raise StepFailed(
                "the EFA installer {} is not signed by the EFA key {}; not installing it (gpg said: {})".format(
                    efa_tarball_name(), EFA_KEY_FINGERPRINT, (verify.stdout + verify.stderr).strip()[-800:]
                )
            )
        node.run(["tar", "-xzf", tarball, "-C", work], timeout=600)
        result = node.run(
            ["env", "-C", work + "/aws-efa-installer", "./efa_installer.sh", "-y"],
            check=False,
            timeout=EFA_INSTALL_TIMEOUT_S,
        )
        output = (result.stdout + result.stderr).strip()
        if "Please reboot" in output:
            # It could not unload the old efa module; user space works, the new module loads at next boot.
            log("efa_reboot_required", installer=EFA_INSTALLER_VERSION)
        if result.ok:
            return ""
        # The installer also exits 1 when only its closing ping test fails; _verify decides.
        log("efa_installer_failed", returncode=result.returncode, output=output[-2000:])
        return output

    def _verify(self, node: Node, tail: str = "") -> None:
        if not self.provider_ok(node):
            raise StepFailed(
                "after installing EFA installer {}, `{}` lists no efa provider{}. Fix: check the instance "
                "type supports EFA, that the security group allows all traffic to and from itself, and the "
                "installer output above; a kernel without ib_uverbs needs a kernel upgrade and "
                "reboot".format(EFA_INSTALLER_VERSION, " ".join(fi_info_argv()), ": " + tail[-1500:] if tail else "")
            )
        if self.plugin_missing(node):
            raise StepFailed(
                "EFA installer {} installed libfabric but not the aws-ofi-nccl plugin ({} missing); without it "
                "NCCL falls back to TCP sockets. Fix: use an installer of version 1.39 or later".format(
                    EFA_INSTALLER_VERSION, OFI_NCCL_DIRS[0]
                )
            )

    def describe(self, node: Node) -> List[str]:
        actions: List[str] = []
        if self.software_needed(node):
            name = efa_tarball_name()
            actions += [
                "curl {0}/{1}, {0}/{1}.sig and {2} into /var/tmp/hyperpod-cdk-efa-*".format(
                    EFA_INSTALLER_URL, name, EFA_KEY_URL
                ),
                "gpg --verify {}.sig {} (must be signed by key {})".format(name, name, EFA_KEY_FINGERPRINT),
                "tar -xzf {}; env -C aws-efa-installer ./efa_installer.sh -y".format(name),
                "verify: {}{}".format(
                    " ".join(fi_info_argv()),
                    " and {} present".format(OFI_NCCL_DIRS[0]) if self._found(node).nvidia_gpus else "",
                ),
            ]
        if self.ptrace_needed(node):
            actions.append(
                "write {} (kernel.yama.ptrace_scope = 0); sysctl -w kernel.yama.ptrace_scope=0".format(
                    PTRACE_SYSCTL_FILE
                )
            )
        return actions


def signed_by(status: str, fingerprint: str) -> bool:
    """Whether gpg's ``--status-fd`` output has a valid signature by ``fingerprint`` (primary or subkey)."""
    wanted = fingerprint.replace(" ", "").upper()
    for line in status.splitlines():
        fields = line.split()
        if (
            len(fields) >= 3
            and fields[:2] == ["[GNUPG:]", "VALIDSIG"]
            and wanted in (fields[2].upper(), fields[-1].upper())
        ):
            return True
    return False
