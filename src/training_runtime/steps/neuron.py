"""Neuron: the Neuron apt repository (signed-by keyring) and the pinned driver, runtime, collectives and tools."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from training_runtime.apt import (
    apt_install,
    apt_install_argv,
    apt_update_argv,
    download,
    package_version,
    version_matches,
)
from training_runtime.errors import StepFailed
from training_runtime.files import file_matches, read_text, write_file
from training_runtime.node import Node
from training_runtime.paths import NEURON_LS
from training_runtime.pins import NEURON_PACKAGES, NEURON_RELEASE
from training_runtime.steps import Step

NEURON_APT_URL = "https://apt.repos.neuron.amazonaws.com"
NEURON_KEY_URL = NEURON_APT_URL + "/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB"
NEURON_KEYRING = "/etc/apt/keyrings/neuron.asc"
"""ASCII-armoured, which apt reads directly when the file name ends in ``.asc`` (apt 1.4+): no gpg needed."""
NEURON_SOURCES = "/etc/apt/sources.list.d/neuron.list"
PGP_KEY_HEADER = "-----BEGIN PGP PUBLIC KEY BLOCK-----"


def os_release(node: Node) -> Dict[str, str]:
    values: Dict[str, str] = {}
    for line in (read_text(node, "/etc/os-release") or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip('"')
    return values


class NeuronSoftware(Step):
    """The Neuron apt repository and the pinned driver, runtime, collectives and tools; ``neuron-ls`` works."""

    name = "neuron-software"

    def sources_line(self, node: Node) -> Optional[str]:
        codename = os_release(node).get("VERSION_CODENAME")
        if not codename:
            return None
        return "deb [signed-by={}] {} {} main\n".format(NEURON_KEYRING, NEURON_APT_URL, codename)

    def keyring_ok(self, node: Node) -> bool:
        return (read_text(node, NEURON_KEYRING) or "").startswith(PGP_KEY_HEADER)

    def repo_ok(self, node: Node) -> bool:
        line = self.sources_line(node)
        return line is not None and file_matches(node, NEURON_SOURCES, line, 0o644) and self.keyring_ok(node)

    def mismatched(self, node: Node) -> List[Tuple[str, str]]:
        return [(p, v) for p, v in NEURON_PACKAGES if not version_matches(package_version(node, p), v)]

    def needed(self, node: Node) -> bool:
        return not self.repo_ok(node) or bool(self.mismatched(node))

    def install_list(self, node: Node) -> List[str]:
        mismatched = self.mismatched(node)
        wanted = ["{}={}*".format(p, v) for p, v in mismatched]
        release = (read_text(node, "/proc/sys/kernel/osrelease") or "").strip()
        if release and any(p == "aws-neuronx-dkms" for p, _ in mismatched):
            wanted.insert(0, "linux-headers-" + release)  # DKMS builds the driver against the running kernel
        return wanted

    def apply(self, node: Node) -> None:
        line = self.sources_line(node)
        if line is None:
            raise StepFailed(
                "Neuron devices found but /etc/os-release has no VERSION_CODENAME, so the Neuron apt repository "
                "cannot be chosen. Fix: use an Ubuntu AMI (HyperPod's default or a Neuron DLAMI)"
            )
        if not self.keyring_ok(node):
            key = download(node, NEURON_KEY_URL).stdout
            if not key.startswith(PGP_KEY_HEADER):
                raise StepFailed("{} did not return an ASCII-armoured PGP key".format(NEURON_KEY_URL))
            write_file(node, NEURON_KEYRING, key, mode=0o644)
        write_file(node, NEURON_SOURCES, line, mode=0o644)
        packages = self.install_list(node)
        if packages:
            apt_install(node, packages, allow_downgrades=True)
        result = node.run([NEURON_LS], check=False, timeout=300)
        if not result.ok:
            raise StepFailed(
                "neuron-ls failed after installing Neuron {} (exit {}): {}. Fix: check `dmesg | grep neuron` (the "
                "DKMS driver must build for the running kernel; a kernel without headers cannot)".format(
                    NEURON_RELEASE, result.returncode, (result.stdout + result.stderr).strip()[-1500:]
                )
            )

    def describe(self, node: Node) -> List[str]:
        line = self.sources_line(node)
        if line is None:
            return ["FAIL: /etc/os-release has no VERSION_CODENAME (needs Ubuntu)"]
        actions = []
        if not self.keyring_ok(node):
            actions.append("curl {} > {}".format(NEURON_KEY_URL, NEURON_KEYRING))
        if not file_matches(node, NEURON_SOURCES, line, 0o644):
            actions.append("write {}: {}".format(NEURON_SOURCES, line.strip()))
        packages = self.install_list(node)
        if packages:
            actions.append(" ".join(apt_update_argv()))
            actions.append(" ".join(apt_install_argv(packages, allow_downgrades=True)))
        actions.append("verify: " + NEURON_LS)
        return actions
