"""Neuron: the Neuron apt repository (signed-by keyring) and the pinned driver, runtime, collectives and tools."""

from __future__ import annotations

import os
import shutil
import tempfile
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
from training_runtime.pins import NEURON_KEY_FINGERPRINT, NEURON_PACKAGES, NEURON_RELEASE
from training_runtime.run import CommandError
from training_runtime.steps import Step

NEURON_APT_URL = "https://apt.repos.neuron.amazonaws.com"
NEURON_KEY_URL = NEURON_APT_URL + "/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB"
NEURON_KEYRING = "/etc/apt/keyrings/neuron.asc"
"""ASCII-armoured, which apt reads directly when the file name ends in ``.asc`` (apt 1.4+). It is written only
after gpg shows it holds the pinned key (:data:`~training_runtime.pins.NEURON_KEY_FINGERPRINT`) and no other, and
checked again on every run, as the EFA installer's signature is checked against its pinned key."""
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
        if not (read_text(node, NEURON_KEYRING) or "").startswith(PGP_KEY_HEADER):
            return False
        return key_fingerprints(node, NEURON_KEYRING) == [NEURON_KEY_FINGERPRINT]

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
            write_file(node, NEURON_KEYRING, self.verified_key(node), mode=0o644)
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

    def verified_key(self, node: Node) -> str:
        """The repository key, downloaded, and shown by gpg to be the pinned key and only it."""
        key = download(node, NEURON_KEY_URL).stdout
        if not key.startswith(PGP_KEY_HEADER):
            raise StepFailed("{} did not return an ASCII-armoured PGP key".format(NEURON_KEY_URL))
        with _scratch(node) as work:
            write_file(node, work + "/neuron.asc", key, mode=0o600)
            found = key_fingerprints(node, work + "/neuron.asc")
        if found != [NEURON_KEY_FINGERPRINT]:
            raise StepFailed(
                "{} holds the key(s) {}, not only the Neuron repository key {}; not trusting it for apt. Fix: if AWS "
                "rotated the key, check the new fingerprint with AWS and change NEURON_KEY_FINGERPRINT "
                "(training_runtime/pins.py)".format(
                    NEURON_KEY_URL, ", ".join(found) or "(none gpg could read)", NEURON_KEY_FINGERPRINT
                )
            )
        return key

    def describe(self, node: Node) -> List[str]:
        line = self.sources_line(node)
        if line is None:
            return ["FAIL: /etc/os-release has no VERSION_CODENAME (needs Ubuntu)"]
        actions = []
        if not self.keyring_ok(node):
            actions.append(
                "curl {} > {} (gpg --show-keys must show only key {})".format(
                    NEURON_KEY_URL, NEURON_KEYRING, NEURON_KEY_FINGERPRINT
                )
            )
        if not file_matches(node, NEURON_SOURCES, line, 0o644):
            actions.append("write {}: {}".format(NEURON_SOURCES, line.strip()))
        packages = self.install_list(node)
        if packages:
            actions.append(" ".join(apt_update_argv()))
            actions.append(" ".join(apt_install_argv(packages, allow_downgrades=True)))
        actions.append("verify: " + NEURON_LS)
        return actions


class _scratch:
    """A private directory under the node's /var/tmp, as a node path, removed afterwards."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.host = ""

    def __enter__(self) -> str:
        base = self.node.path("/var/tmp")
        base.mkdir(parents=True, exist_ok=True)
        self.host = tempfile.mkdtemp(prefix="hyperpod-cdk-neuron-", dir=str(base))
        return "/" + os.path.relpath(self.host, str(self.node.root))

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.host, ignore_errors=True)


def key_fingerprints(node: Node, path: str) -> List[str]:
    """The primary keys' fingerprints in the OpenPGP key file ``path`` (``gpg --show-keys``; imports nothing)."""
    with _scratch(node) as home:
        argv = ["gpg", "--batch", "--homedir", home, "--with-colons", "--show-keys", path]
        try:
            result = node.run(argv, check=False, timeout=60)
        except CommandError as error:
            if error.returncode != 127:
                raise
            result = None
    if result is None or result.returncode == 127:
        raise StepFailed(
            "gpg is needed to check the Neuron repository key and is not installed. Fix: use an AMI with gnupg "
            "(Ubuntu server images have it)"
        )
    return primary_fingerprints(result.stdout) if result.ok else []


def primary_fingerprints(colons: str) -> List[str]:
    """The fingerprints of the primary keys (``pub``, not ``sub``) in gpg's ``--with-colons`` listing."""
    found: List[str] = []
    record = ""
    for line in colons.splitlines():
        fields = line.split(":")
        if fields[0] == "fpr":
            if record == "pub" and len(fields) > 9:
                found.append(fields[9].upper())
        else:
            record = fields[0]
    return found
