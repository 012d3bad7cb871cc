"""EFA, NVIDIA and Neuron software on the nodes that have the hardware.

Which steps a node gets depends only on what :func:`training_runtime.accelerators.detect` finds on it
(never on the instance type), and on the ``install_accelerator_software`` option: with it off, the
runtime leaves the accelerator software entirely to the AMI.

* :class:`EfaSoftware` - libfabric with the ``efa`` provider (and, on NVIDIA nodes, the aws-ofi-nccl
  plugin, which the EFA installer ships since 1.39), installed from the pinned EFA installer when the
  provider is missing, and ``kernel.yama.ptrace_scope = 0`` (libfabric's shared-memory transport uses
  cross-process memory access, which Ubuntu's default ptrace protection blocks).
* :class:`NvidiaSoftware` - the driver must come with the AMI (checked, never installed); fabric
  manager (NVSwitch systems only: without it CUDA fails with error 802 "system not yet initialized") and
  DCGM are installed and started when missing.
* :class:`NeuronSoftware` - the Neuron apt repository (signed-by keyring) and the pinned driver,
  runtime, collectives and tools.

Pinned versions are module constants; change them here (and in the tests) to move a cluster forward.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Dict, List, Optional, Tuple

from training_runtime.accelerators import Accelerators, detect, detection_warnings
from training_runtime.apt import apt_install, apt_install_argv, apt_update_argv
from training_runtime.errors import StepFailed
from training_runtime.files import file_matches, read_text, write_file
from training_runtime.log import log
from training_runtime.node import Node
from training_runtime.paths import DCGM_BINARY, FI_INFO, NEURON_LS
from training_runtime.run import CommandError, Result
from training_runtime.steps import Step

DOWNLOAD_TIMEOUT_S = 900.0

# --- shared helpers ------------------------------------------------------------------------------


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


def service_active(node: Node, unit: str) -> bool:
    """Whether a systemd unit is active; nodes without systemd (containers) are not managed here."""
    if not node.has_systemd:
        return True
    return node.run(["systemctl", "is-active", "--quiet", unit], check=False, timeout=60).ok


def start_service(node: Node, unit: str) -> None:
    node.run(["systemctl", "enable", "--now", unit], timeout=300)
    if not service_active(node, unit):
        status = node.run(["systemctl", "status", "--no-pager", unit], check=False, timeout=60)
        raise StepFailed(
            "{} did not stay active after systemctl enable --now: {}".format(unit, status.stdout.strip()[-1500:])
        )


# --- EFA -----------------------------------------------------------------------------------------

EFA_INSTALLER_VERSION = "1.47.0"
"""The EFA installer every node installs when its EFA software is missing or broken.

1.47.0 is what awsome-distributed-training's nccl-tests image pinned at the time of writing (with NCCL
2.29.3); it bundles aws-ofi-nccl (shipped inside the installer since 1.39, under /opt/amazon/ofi-nccl).
Avoid 1.40.0 with debug packages (aws/aws-ofi-nccl#872); 1.50+ bundles the EFA-GDA plugin.
"""
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


# --- NVIDIA --------------------------------------------------------------------------------------

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
        state = {"driver": True, "dcgm": self.dcgm_installed(node), "dcgm_running": service_active(node, DCGM_SERVICE)}
        if self._wants_fabric_manager(node):
            state["fabric_manager"] = self.fabric_manager_installed(node, driver)
            state["fabric_manager_running"] = service_active(node, FABRIC_MANAGER_SERVICE)
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
            if not service_active(node, FABRIC_MANAGER_SERVICE):
                start_service(node, FABRIC_MANAGER_SERVICE)
        if not self.dcgm_installed(node):
            raise StepFailed("{} is still missing after installing {}".format(DCGM_BINARY, DCGM_PACKAGE))
        if not service_active(node, DCGM_SERVICE):
            start_service(node, DCGM_SERVICE)

    def describe(self, node: Node) -> List[str]:
        driver, problem = self.driver(node)
        if driver is None:
            return ["FAIL: " + problem]
        actions = []
        packages = self.packages(node, driver)
        if packages:
            actions.append(" ".join(apt_update_argv()))
            actions.append(" ".join(apt_install_argv(packages)))
        if self._wants_fabric_manager(node) and not service_active(node, FABRIC_MANAGER_SERVICE):
            actions.append("systemctl enable --now " + FABRIC_MANAGER_SERVICE)
        if not service_active(node, DCGM_SERVICE):
            actions.append("systemctl enable --now " + DCGM_SERVICE)
        return actions


def fabric_manager_requirement(driver: str) -> str:
    """``nvidia-fabricmanager-535=535.183.01-*``: the package of the driver's branch at the driver's version."""
    major = driver.split(".")[0]
    return "{}={}-*".format(FABRIC_MANAGER_PACKAGE.format(major=major), driver)


# --- Neuron --------------------------------------------------------------------------------------

NEURON_RELEASE = "2.28.1"
"""The Neuron SDK release whose system packages are pinned (versions from the SDK's own release manifest,
``src/helperscripts/n2-manifest.json`` in aws-neuron/aws-neuron-sdk).

Why not the newest: Neuron 2.30 dropped PyTorch/XLA *training* ("PyTorch 2.9 was the last version based
on the PyTorch/XLA backend for training"), and the end-of-support notice for NxD Training names 2.28 as
its last release - the two notices disagree by one release, so this takes the older. Trn1 has no
successor stack (the native "TorchNeuron" backend targets Trn2/Trn3, and was a private beta), so trn1
training stays on this last XLA-capable release. Its PyTorch stack is pinned in ``pytorch_env.py``.
"""
NEURON_PACKAGES: Tuple[Tuple[str, str], ...] = (
    ("aws-neuronx-dkms", "2.26.10.0"),
    ("aws-neuronx-collectives", "2.30.59.0"),
    ("aws-neuronx-runtime-lib", "2.30.51.0"),
    ("aws-neuronx-tools", "2.28.23.0"),
)
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


# --- which steps a node gets ---------------------------------------------------------------------


def accelerator_steps(node: Node) -> List[Step]:
    """The accelerator steps for this node, in order; none on a node without the hardware."""
    if not node.options.install_accelerator_software:
        return []
    found = detect(node)
    if found.any:
        log(
            "accelerators",
            efa=found.efa,
            nvidia_gpus=found.nvidia_gpus,
            nvswitches=found.nvswitches,
            neuron_devices=found.neuron_devices,
        )
    for warning in detection_warnings(node, found):
        log("accelerator_warning", message=warning)
    steps: List[Step] = []
    if found.nvidia_gpus:
        steps.append(NvidiaSoftware(found))
    if found.neuron_devices:
        steps.append(NeuronSoftware())
    if found.efa:
        steps.append(EfaSoftware(found))
    return steps
