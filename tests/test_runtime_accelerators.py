"""Accelerator detection (fake sysfs and /dev) and the EFA / NVIDIA / Neuron steps (recorded commands)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime_fakes import RecordingRunner, fake_node, touch
from training_runtime.accelerators import Accelerators, detect, detection_warnings
from training_runtime.apt import APT_OPTIONS, version_matches
from training_runtime.errors import StepFailed
from training_runtime.groups import GroupSpec
from training_runtime.node import Node
from training_runtime.paths import FI_INFO, NEURON_LS
from training_runtime.pins import NEURON_KEY_FINGERPRINT
from training_runtime.run import Result
from training_runtime.steps.accelerators import accelerator_steps
from training_runtime.steps.efa import (
    EFA_KEY_FINGERPRINT,
    PTRACE_PROC,
    PTRACE_SYSCTL,
    PTRACE_SYSCTL_FILE,
    EfaSoftware,
    signed_by,
)
from training_runtime.steps.neuron import NEURON_KEYRING, NEURON_SOURCES, NeuronSoftware, primary_fingerprints
from training_runtime.steps.nvidia import NvidiaSoftware

# --- fakes -----------------------------------------------------------------------------------------


class ScriptedRunner(RecordingRunner):
    """A RecordingRunner whose commands can also change the fake node (``effects`` by argv prefix)."""

    def __init__(
        self,
        respond: dict[tuple[str, ...], tuple[int, str]] | None = None,
        effects: dict[tuple[str, ...], Callable[[list[str]], None]] | None = None,
    ) -> None:
        super().__init__(respond)
        self.effects = dict(effects or {})
        self.envs: list[tuple[list[str], Any]] = []

    def run(self, argv: Any, **kwargs: Any) -> Result:
        argv = list(argv)
        self.envs.append((argv, kwargs.get("env")))
        for prefix, effect in self.effects.items():
            if tuple(argv[: len(prefix)]) == prefix:
                effect(argv)
        return super().run(argv, **kwargs)


def executable(root: Path, path: str, content: str = "#!/bin/sh\n") -> None:
    os.chmod(touch(root, path, content), 0o755)


def pci(root: Path, slot: int, vendor: int, device: int, klass: int) -> None:
    base = f"/sys/bus/pci/devices/0000:{slot:02x}:00.0"
    touch(root, base + "/vendor", f"0x{vendor:04x}\n")
    touch(root, base + "/device", f"0x{device:04x}\n")
    touch(root, base + "/class", f"0x{klass:06x}\n")


def dev(root: Path, *names: str) -> None:
    for name in names:
        touch(root, "/dev/" + name)


def cpu_machine(root: Path) -> None:
    pci(root, 0x00, 0x8086, 0x1237, 0x060000)  # host bridge
    pci(root, 0x01, 0x1D0F, 0xEC20, 0x020000)  # ENA
    pci(root, 0x02, 0x1D0F, 0x8061, 0x010802)  # EBS NVMe
    dev(root, "null", "nvme0", "tty0")


def p4d_machine(root: Path) -> None:
    cpu_machine(root)
    for i in range(8):
        pci(root, 0x10 + i, 0x10DE, 0x20B0, 0x030200)  # A100 SXM4
    for i in range(6):
        pci(root, 0x20 + i, 0x10DE, 0x1AF1, 0x068000)  # NVSwitch
    for i in range(4):
        pci(root, 0x30 + i, 0x1D0F, 0xEFA1, 0x020000)  # EFA gen 2
    dev(root, *(f"nvidia{i}" for i in range(8)), "nvidiactl", "nvidia-uvm", "nvidia-modeset")
    dev(root, *(f"nvidia-nvswitch{i}" for i in range(6)), "nvidia-nvswitchctl")
    dev(root, *(f"infiniband/uverbs{i}" for i in range(4)), "infiniband/rdma_cm")


def p5_machine(root: Path) -> None:
    cpu_machine(root)
    for i in range(8):
        pci(root, 0x10 + i, 0x10DE, 0x2330, 0x030200)  # H100 SXM5
    for i in range(4):
        pci(root, 0x20 + i, 0x10DE, 0x22A3, 0x068000)  # NVSwitch gen 3
    for i in range(32):
        pci(root, 0x40 + i, 0x1D0F, 0xEFA2, 0x020000)
    dev(root, *(f"nvidia{i}" for i in range(8)), "nvidiactl")
    dev(root, *(f"infiniband/uverbs{i}" for i in range(32)))


def trn1_machine(root: Path) -> None:
    cpu_machine(root)
    for i in range(16):
        pci(root, 0x10 + i, 0x1D0F, 0x7164, 0x088000)  # Trainium1
    for i in range(8):
        pci(root, 0x30 + i, 0x1D0F, 0xEFA1, 0x020000)
    dev(root, *(f"neuron{i}" for i in range(16)))
    dev(root, *(f"infiniband/uverbs{i}" for i in range(8)))


def node_on(
    tmp_path: Path,
    machine: Callable[[Path], None] | None,
    instance_type: str = "ml.p4d.24xlarge",
    runner: RecordingRunner | None = None,
    options: dict[str, Any] | None = None,
    systemd: bool = True,
) -> Node:
    root = tmp_path / "root"
    root.mkdir(parents=True, exist_ok=True)
    if machine is not None:
        machine(root)
    if systemd:
        (root / "run/systemd/system").mkdir(parents=True, exist_ok=True)
    groups = (
        GroupSpec("controller", "controller", "ml.m5.xlarge"),
        GroupSpec("login", "login", "ml.m5.large"),
        GroupSpec("workers", "compute", instance_type),
    )
    return fake_node(root, groups=groups, runner=runner or ScriptedRunner(), options=options)


def runner_of(node: Node) -> ScriptedRunner:
    assert isinstance(node.runner, ScriptedRunner)
    return node.runner


# --- detection -------------------------------------------------------------------------------------


def test_cpu_node_has_nothing_even_when_its_instance_type_has_accelerators(tmp_path: Path) -> None:
    node = node_on(tmp_path, cpu_machine, instance_type="ml.p5.48xlarge")
    assert detect(node) == Accelerators(0, 0, 0, 0)
    assert accelerator_steps(node) == []
    assert runner_of(node).commands == []


def test_p4d_like(tmp_path: Path) -> None:
    node = node_on(tmp_path, p4d_machine)
    assert detect(node) == Accelerators(efa=4, nvidia_gpus=8, nvswitches=6, neuron_devices=0)
    assert detection_warnings(node) == []


def test_p5_like(tmp_path: Path) -> None:
    node = node_on(tmp_path, p5_machine, instance_type="ml.p5.48xlarge")
    assert detect(node) == Accelerators(efa=32, nvidia_gpus=8, nvswitches=4, neuron_devices=0)
    assert detection_warnings(node) == []


def test_trn1_like(tmp_path: Path) -> None:
    node = node_on(tmp_path, trn1_machine, instance_type="ml.trn1.32xlarge")
    assert detect(node) == Accelerators(efa=8, nvidia_gpus=0, nvswitches=0, neuron_devices=16)
    assert detection_warnings(node) == []


def test_inferentia1_and_unknown_amazon_devices_are_not_neuron(tmp_path: Path) -> None:
    def machine(root: Path) -> None:
        cpu_machine(root)
        pci(root, 0x10, 0x1D0F, 0x7064, 0x088000)  # Inferentia1: not driven by the aws-neuronx stack
        pci(root, 0x11, 0x1D0F, 0x7264, 0x088000)  # Inferentia2
        pci(root, 0x12, 0x1D0F, 0x7364, 0x088000)  # Trainium2
        pci(root, 0x13, 0x10DE, 0x1234, 0x040300)  # NVIDIA audio function: not a GPU

    assert detect(node_on(tmp_path, machine)) == Accelerators(neuron_devices=2)


def test_device_nodes_are_the_fallback_without_a_pci_bus(tmp_path: Path) -> None:
    def machine(root: Path) -> None:  # a container: /dev passed through, no /sys/bus/pci
        dev(root, *(f"nvidia{i}" for i in range(4)), "nvidiactl", "nvidia-uvm")
        dev(root, "infiniband/uverbs0", "neuron0", "neuron1")

    assert detect(node_on(tmp_path, machine)) == Accelerators(efa=1, nvidia_gpus=4, nvswitches=0, neuron_devices=2)


def test_warns_when_counts_differ_from_the_instance_type(tmp_path: Path) -> None:
    def machine(root: Path) -> None:
        p4d_machine(root)
        for name in ("vendor", "device", "class"):
            (root / "sys/bus/pci/devices/0000:17:00.0" / name).unlink()  # GPU 7 fell off the bus
        (root / "dev/nvidia7").unlink()
        (root / "dev/infiniband/uverbs3").unlink()  # one EFA without its device node

    node = node_on(tmp_path, machine)
    found = detect(node)
    assert found.nvidia_gpus == 7
    warnings = detection_warnings(node, found)
    assert "4 EFA interfaces on the PCI bus but 3 /dev/infiniband/uverbsN device nodes" in warnings[0]
    assert any("ml.p4d.24xlarge has 8 NVIDIA GPUs but 7 were found" in w for w in warnings)
    # a warning never changes what is planned
    assert [type(s) for s in accelerator_steps(node)] == [NvidiaSoftware, EfaSoftware]


def test_steps_per_profile(tmp_path: Path) -> None:
    assert [type(s) for s in accelerator_steps(node_on(tmp_path / "a", p4d_machine))] == [
        NvidiaSoftware,
        EfaSoftware,
    ]
    trn = node_on(tmp_path / "b", trn1_machine, instance_type="ml.trn1.32xlarge")
    assert [type(s) for s in accelerator_steps(trn)] == [NeuronSoftware, EfaSoftware]
    off = node_on(tmp_path / "c", p4d_machine, options={"install_accelerator_software": False})
    assert accelerator_steps(off) == []


# --- EFA -------------------------------------------------------------------------------------------

FI_INFO_OK = (
    "provider: efa\n    fabric: efa\n    domain: rdmap16s27-rdm\n    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n"
)
VALIDSIG = (
    "[GNUPG:] GOODSIG A05480B1DD2D3CCC ec2-efa\n"
    f"[GNUPG:] VALIDSIG {EFA_KEY_FINGERPRINT} 2025-01-01 0 4 0 1 8 00 {EFA_KEY_FINGERPRINT}\n"
)
TARBALL = "aws-efa-installer-1.47.0.tar.gz"
CURL = ["curl", "--fail", "--silent", "--show-error", "--location", "--proto", "=https", "--max-time", "600"]


def efa_runner(root: Path, *, signature: str = VALIDSIG, installer_rc: int = 0, works: bool = True) -> ScriptedRunner:
    runner = ScriptedRunner({("gpg", "--batch"): (0, signature), ("env", "-C"): (installer_rc, "")})

    def installed(argv: list[str]) -> None:
        executable(root, FI_INFO)
        (root / "opt/amazon/ofi-nccl/lib").mkdir(parents=True, exist_ok=True)
        if works:
            runner.respond[(FI_INFO,)] = (0, FI_INFO_OK)
        else:
            runner.respond[(FI_INFO,)] = (1, "fi_getinfo: -61 (No data available)")

    def sysctl(argv: list[str]) -> None:
        touch(root, PTRACE_PROC, "0\n")

    runner.effects = {("env", "-C"): installed, ("sysctl", "-w"): sysctl}
    return runner


def test_efa_installs_the_pinned_installer_verified_by_its_signature(tmp_path: Path) -> None:
    root = tmp_path / "root"
    runner = efa_runner(root)
    node = node_on(tmp_path, p4d_machine, runner=runner)
    touch(root, PTRACE_PROC, "1\n")
    step = EfaSoftware()
    assert step.needed(node)
    assert runner.commands == []  # fi_info is not even there to ask
    step.apply(node)

    work = runner.commands[0][-2].rsplit("/", 1)[0]
    assert re.fullmatch(r"/var/tmp/hyperpod-cdk-efa-[^/]+", work)
    base = "https://efa-installer.amazonaws.com/"
    assert runner.commands == [
        [*CURL, "--output", work + "/aws-efa-installer.key", base + "aws-efa-installer.key"],
        [*CURL, "--output", work + "/" + TARBALL, base + TARBALL],
        [*CURL, "--output", work + "/" + TARBALL + ".sig", base + TARBALL + ".sig"],
        ["gpg", "--batch", "--homedir", work + "/gnupg", "--import", work + "/aws-efa-installer.key"],
        [
            "gpg",
            "--batch",
            "--homedir",
            work + "/gnupg",
            "--status-fd",
            "1",
            "--verify",
            work + "/" + TARBALL + ".sig",
            work + "/" + TARBALL,
        ],
        ["tar", "-xzf", work + "/" + TARBALL, "-C", work],
        ["env", "-C", work + "/aws-efa-installer", "./efa_installer.sh", "-y"],
        [FI_INFO, "-p", "efa", "-t", "FI_EP_RDM"],
        ["sysctl", "-w", "kernel.yama.ptrace_scope=0"],
    ]
    assert not node.path(work).exists()  # the download is cleaned up
    assert (root / PTRACE_SYSCTL_FILE.lstrip("/")).read_text() == PTRACE_SYSCTL
    assert "kernel.yama.ptrace_scope = 0" in PTRACE_SYSCTL

    runner.commands.clear()
    assert not step.needed(node)
    assert runner.commands == [[FI_INFO, "-p", "efa", "-t", "FI_EP_RDM"]]
    assert step.describe(node) == []


def test_efa_not_needed_on_an_ami_with_working_efa(tmp_path: Path) -> None:
    root = tmp_path / "root"
    node = node_on(tmp_path, p4d_machine, runner=ScriptedRunner({(FI_INFO,): (0, FI_INFO_OK)}))
    executable(root, FI_INFO)
    (root / "opt/aws-ofi-nccl").mkdir(parents=True)  # older DLAMI location counts
    touch(root, PTRACE_SYSCTL_FILE, PTRACE_SYSCTL)
    os.chmod(root / PTRACE_SYSCTL_FILE.lstrip("/"), 0o644)
    touch(root, PTRACE_PROC, "0\n")
    assert not EfaSoftware().needed(node)


def test_efa_needed_when_the_provider_is_missing_or_the_plugin_is(tmp_path: Path) -> None:
    root = tmp_path / "root"
    runner = ScriptedRunner({(FI_INFO,): (0, "provider: tcp\n")})
    node = node_on(tmp_path, p4d_machine, runner=runner)
    executable(root, FI_INFO)
    touch(root, PTRACE_SYSCTL_FILE, PTRACE_SYSCTL)
    os.chmod(root / PTRACE_SYSCTL_FILE.lstrip("/"), 0o644)
    step = EfaSoftware()
    assert step.needed(node)  # fi_info works but lists no efa provider
    runner.respond[(FI_INFO,)] = (0, FI_INFO_OK)
    assert step.needed(node)  # an NVIDIA node without aws-ofi-nccl
    assert "and /opt/amazon/ofi-nccl present" in step.describe(node)[-1]
    (root / "opt/amazon/ofi-nccl").mkdir(parents=True)
    assert not step.needed(node)


def test_efa_only_ptrace_when_the_software_works(tmp_path: Path) -> None:
    root = tmp_path / "root"
    runner = ScriptedRunner({(FI_INFO,): (0, FI_INFO_OK)})
    node = node_on(tmp_path, trn1_machine, instance_type="ml.trn1.32xlarge", runner=runner)
    executable(root, FI_INFO)
    step = EfaSoftware()
    assert step.describe(node) == [
        f"write {PTRACE_SYSCTL_FILE} (kernel.yama.ptrace_scope = 0); sysctl -w kernel.yama.ptrace_scope=0"
    ]
    step.apply(node)
    assert not runner.ran("curl") and not runner.ran("sysctl")  # no /proc value to change on this fake
    assert not step.needed(node)


def test_efa_refuses_an_installer_with_a_bad_signature(tmp_path: Path) -> None:
    root = tmp_path / "root"
    bad = "[GNUPG:] BADSIG A05480B1DD2D3CCC ec2-efa\n"
    runner = efa_runner(root, signature=bad)
    node = node_on(tmp_path, p4d_machine, runner=runner)
    with pytest.raises(StepFailed, match="is not signed by the EFA key " + EFA_KEY_FINGERPRINT):
        EfaSoftware().apply(node)
    assert not runner.ran("tar") and not runner.ran("env")
    assert list((root / "var/tmp").iterdir()) == []


def test_efa_signature_must_be_by_the_pinned_key() -> None:
    other = VALIDSIG.replace(EFA_KEY_FINGERPRINT, "0" * 40)
    assert signed_by(VALIDSIG, EFA_KEY_FINGERPRINT)
    assert not signed_by(other, EFA_KEY_FINGERPRINT)
    assert not signed_by("[GNUPG:] GOODSIG A05480B1DD2D3CCC ec2-efa\n", EFA_KEY_FINGERPRINT)


def test_efa_installer_failing_only_its_ping_test_is_accepted(tmp_path: Path) -> None:
    root = tmp_path / "root"
    node = node_on(tmp_path, p4d_machine, runner=efa_runner(root, installer_rc=1))
    step = EfaSoftware()
    step.apply(node)
    assert not step.needed(node)


def test_efa_fails_clearly_when_the_provider_still_does_not_work(tmp_path: Path) -> None:
    root = tmp_path / "root"
    node = node_on(tmp_path, p4d_machine, runner=efa_runner(root, installer_rc=1, works=False))
    with pytest.raises(StepFailed, match=r"lists no efa provider.*security group allows all traffic"):
        EfaSoftware().apply(node)


# --- NVIDIA ----------------------------------------------------------------------------------------

DRIVER = "535.183.01"


def nvidia_runner(root: Path, driver_output: str = (DRIVER + "\n") * 8) -> ScriptedRunner:
    runner = ScriptedRunner(
        {
            ("nvidia-smi",): (0, driver_output),
            ("systemctl", "is-active"): (3, ""),
            ("nv-fabricmanager", "--version"): (0, f"Fabric Manager version is : {DRIVER}\n"),
        }
    )

    def apt_install(argv: list[str]) -> None:
        if argv[len(APT_OPTIONS) + 1] != "install":
            return
        if any(a.startswith("nvidia-fabricmanager-") for a in argv):
            executable(root, "/usr/bin/nv-fabricmanager")
        if "datacenter-gpu-manager" in argv:
            executable(root, "/usr/bin/dcgmi")

    def started(argv: list[str]) -> None:
        runner.respond[("systemctl", "is-active", "--quiet", argv[-1])] = (0, "")

    runner.effects = {("apt-get",): apt_install, ("systemctl", "enable", "--now"): started}
    return runner


def test_nvidia_installs_fabric_manager_matching_the_driver_and_dcgm(tmp_path: Path) -> None:
    root = tmp_path / "root"
    runner = nvidia_runner(root)
    node = node_on(tmp_path, p4d_machine, runner=runner)
    executable(root, "/usr/bin/nvidia-smi")
    step = NvidiaSoftware()
    assert step.needed(node)
    runner.commands.clear()
    step.apply(node)
    query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
    assert runner.commands == [
        query,
        ["apt-get", *APT_OPTIONS, "update"],
        [
            "apt-get",
            *APT_OPTIONS,
            "install",
            "-y",
            "--no-install-recommends",
            "nvidia-fabricmanager-535=535.183.01-*",
            "datacenter-gpu-manager",
        ],
        ["nv-fabricmanager", "--version"],
        ["systemctl", "is-active", "--quiet", "nvidia-fabricmanager"],
        ["systemctl", "enable", "--now", "nvidia-fabricmanager"],
        ["systemctl", "is-active", "--quiet", "nvidia-fabricmanager"],
        ["systemctl", "is-active", "--quiet", "nvidia-dcgm"],
        ["systemctl", "enable", "--now", "nvidia-dcgm"],
        ["systemctl", "is-active", "--quiet", "nvidia-dcgm"],
    ]
    assert not step.needed(node)
    assert step.describe(node) == []


def test_nvidia_apt_runs_noninteractive_with_a_lock_timeout(tmp_path: Path) -> None:
    root = tmp_path / "root"
    runner = nvidia_runner(root)
    node = node_on(tmp_path, p4d_machine, runner=runner)
    executable(root, "/usr/bin/nvidia-smi")
    NvidiaSoftware().apply(node)
    apt = [(argv, env) for argv, env in runner.envs if argv[0] == "apt-get"]
    assert len(apt) == 2
    assert all(env == {"DEBIAN_FRONTEND": "noninteractive"} for _, env in apt)
    assert all(argv[1:3] == ["-o", "DPkg::Lock::Timeout=300"] for argv, _ in apt)


def test_nvidia_without_nvswitch_gets_no_fabric_manager(tmp_path: Path) -> None:
    def g5(root: Path) -> None:
        cpu_machine(root)
        for i in range(4):
            pci(root, 0x10 + i, 0x10DE, 0x2237, 0x030200)  # A10G
        dev(root, *(f"nvidia{i}" for i in range(4)))

    root = tmp_path / "root"
    runner = nvidia_runner(root, (DRIVER + "\n") * 4)
    node = node_on(tmp_path, g5, instance_type="ml.g5.12xlarge", runner=runner)
    executable(root, "/usr/bin/nvidia-smi")
    NvidiaSoftware().apply(node)
    installs = [c for c in runner.ran("apt-get") if "install" in c]
    assert installs == [["apt-get", *APT_OPTIONS, "install", "-y", "--no-install-recommends", "datacenter-gpu-manager"]]
    assert not runner.ran("systemctl", "enable", "--now", "nvidia-fabricmanager")


def test_nvidia_fabric_manager_of_another_version_is_replaced(tmp_path: Path) -> None:
    root = tmp_path / "root"
    runner = nvidia_runner(root)
    runner.respond[("nv-fabricmanager", "--version")] = (0, "Fabric Manager version is : 535.54.03\n")
    runner.respond[("systemctl", "is-active")] = (0, "")
    node = node_on(tmp_path, p4d_machine, runner=runner)
    for name in ("nvidia-smi", "nv-fabricmanager", "dcgmi"):
        executable(root, "/usr/bin/" + name)
    step = NvidiaSoftware()
    assert step.needed(node)
    assert step.describe(node)[-1].endswith("install -y --no-install-recommends nvidia-fabricmanager-535=535.183.01-*")
    runner.respond[("nv-fabricmanager", "--version")] = (0, f"Fabric Manager version is : {DRIVER}\n")
    assert not step.needed(node)


def test_nvidia_without_a_driver_fails_and_installs_nothing(tmp_path: Path) -> None:
    node = node_on(tmp_path, p4d_machine, runner=nvidia_runner(tmp_path / "root"))
    step = NvidiaSoftware()
    assert step.needed(node)
    assert step.describe(node)[0].startswith("FAIL: 8 NVIDIA GPUs found but nvidia-smi is not installed")
    with pytest.raises(StepFailed, match=r"never installs drivers\)\. Fix: use a GPU AMI"):
        step.apply(node)
    assert runner_of(node).ran("apt-get") == []


def test_nvidia_smi_failing_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "root"
    runner = nvidia_runner(root)
    runner.respond[("nvidia-smi",)] = (9, "NVIDIA-SMI has failed because it couldn't communicate with the driver")
    node = node_on(tmp_path, p4d_machine, runner=runner)
    executable(root, "/usr/bin/nvidia-smi")
    with pytest.raises(StepFailed, match=r"failed \(exit 9\): NVIDIA-SMI has failed.*Xid"):
        NvidiaSoftware().apply(node)


def test_nvidia_without_systemd_leaves_services_alone(tmp_path: Path) -> None:
    root = tmp_path / "root"
    runner = nvidia_runner(root)
    node = node_on(tmp_path, p4d_machine, runner=runner, systemd=False)
    for name in ("nvidia-smi", "nv-fabricmanager", "dcgmi"):
        executable(root, "/usr/bin/" + name)
    assert not NvidiaSoftware().needed(node)
    assert not runner.ran("systemctl")


# --- Neuron ----------------------------------------------------------------------------------------

KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBF...\n-----END PGP PUBLIC KEY BLOCK-----\n"
KERNEL = "6.8.0-1021-aws"
PINS = {
    "aws-neuronx-dkms": "2.26.10.0",
    "aws-neuronx-collectives": "2.30.59.0",
    "aws-neuronx-runtime-lib": "2.30.51.0",
    "aws-neuronx-tools": "2.28.23.0",
}


def show_keys(*fingerprints: str) -> str:
    """``gpg --with-colons --show-keys`` for keys with these primary fingerprints (each with a subkey)."""
    lines = []
    for index, fingerprint in enumerate(fingerprints):
        lines += [
            f"pub:-:4096:1:{fingerprint[-16:]}:1573493367:::-:::scESC::::::23::0:",
            f"fpr:::::::::{fingerprint}:",
            "uid:-::::1573493367::0::Amazon AWS Neuron <neuron-maintainers@amazon.com>::::::::::0:",
            f"sub:-:4096:1:{index:016X}:1573493367::::::e::::::23:",
            f"fpr:::::::::{index:040X}:",
        ]
    return "\n".join(lines) + "\n"


SHOW_KEYS = show_keys(NEURON_KEY_FINGERPRINT)


def neuron_runner(neuron_ls_rc: int = 0, keys: str = SHOW_KEYS) -> ScriptedRunner:
    runner = ScriptedRunner(
        {
            ("curl",): (0, KEY),
            ("gpg", "--batch"): (0, keys),
            ("dpkg-query",): (1, "dpkg-query: no packages found matching"),
            (NEURON_LS,): (neuron_ls_rc, "instance-type: trn1.32xlarge\n"),
        }
    )

    def apt_install(argv: list[str]) -> None:
        for arg in argv:
            name, sep, version = arg.partition("=")
            if sep and name in PINS:
                runner.respond[("dpkg-query", "-W", "-f=${Status}|${Version}", name)] = (
                    0,
                    "install ok installed|{}-1a2b3c4d".format(version.rstrip("*")),
                )

    runner.effects = {("apt-get",): apt_install}
    return runner


def trn1_node(tmp_path: Path, runner: ScriptedRunner, codename: str | None = "noble") -> Node:
    def machine(root: Path) -> None:
        trn1_machine(root)
        touch(root, "/etc/os-release", 'NAME="Ubuntu"\n' + (f"VERSION_CODENAME={codename}\n" if codename else ""))
        touch(root, "/proc/sys/kernel/osrelease", KERNEL + "\n")

    return node_on(tmp_path, machine, instance_type="ml.trn1.32xlarge", runner=runner)


def test_neuron_repo_and_pinned_packages(tmp_path: Path) -> None:
    runner = neuron_runner()
    node = trn1_node(tmp_path, runner)
    step = NeuronSoftware()
    assert step.needed(node)
    runner.commands.clear()
    step.apply(node)
    query = [["dpkg-query", "-W", "-f=${Status}|${Version}", p] for p in PINS]
    (checked,) = [c for c in runner.commands if c[0] == "gpg"]
    assert checked[:3] == ["gpg", "--batch", "--homedir"] and checked[4:6] == ["--with-colons", "--show-keys"]
    assert checked[6].startswith("/var/tmp/hyperpod-cdk-neuron-") and checked[6].endswith("/neuron.asc")
    assert not any(tmp_path.glob("var/tmp/hyperpod-cdk-neuron-*")), "the scratch directories are removed"
    assert [c for c in runner.commands if c[0] != "gpg"] == [
        [*CURL, "https://apt.repos.neuron.amazonaws.com/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB"],
        *query,
        ["apt-get", *APT_OPTIONS, "update"],
        [
            "apt-get",
            *APT_OPTIONS,
            "install",
            "-y",
            "--no-install-recommends",
            "--allow-downgrades",
            "linux-headers-" + KERNEL,
            "aws-neuronx-dkms=2.26.10.0*",
            "aws-neuronx-collectives=2.30.59.0*",
            "aws-neuronx-runtime-lib=2.30.51.0*",
            "aws-neuronx-tools=2.28.23.0*",
        ],
        [NEURON_LS],
    ]
    assert node.path(NEURON_SOURCES).read_text() == (
        "deb [signed-by=/etc/apt/keyrings/neuron.asc] https://apt.repos.neuron.amazonaws.com noble main\n"
    )
    assert node.path(NEURON_KEYRING).read_text() == KEY
    runner.commands.clear()
    assert not step.needed(node)
    assert [c for c in runner.commands if c[0] != "gpg"] == query  # only reads
    assert [c[-1] for c in runner.commands if c[0] == "gpg"] == [NEURON_KEYRING]  # the key is checked every run


def test_neuron_key_other_than_the_pinned_one_is_refused(tmp_path: Path) -> None:
    for keys in (show_keys("0" * 40), show_keys(NEURON_KEY_FINGERPRINT, "F" * 40), ""):
        runner = neuron_runner(keys=keys)
        node = trn1_node(tmp_path / str(len(keys)), runner)
        with pytest.raises(StepFailed, match="not only the Neuron repository key " + NEURON_KEY_FINGERPRINT):
            NeuronSoftware().apply(node)
        assert not node.path(NEURON_KEYRING).exists()
        assert not runner.ran("apt-get")


def write_keyring(node: Node) -> None:
    node.path(NEURON_KEYRING).parent.mkdir(parents=True, exist_ok=True)
    node.path(NEURON_KEYRING).write_text(KEY)


def test_neuron_keyring_is_checked_against_the_pin(tmp_path: Path) -> None:
    runner = neuron_runner(keys=show_keys("0" * 40))
    node = trn1_node(tmp_path, runner)
    write_keyring(node)
    step = NeuronSoftware()
    assert not step.keyring_ok(node)
    runner.respond[("gpg", "--batch")] = (0, SHOW_KEYS)
    assert step.keyring_ok(node)


def test_primary_fingerprints_are_the_pub_records_only() -> None:
    assert primary_fingerprints(show_keys("A" * 40, "B" * 40)) == ["A" * 40, "B" * 40]
    assert primary_fingerprints("sub:-:1:1:X:::::\nfpr:::::::::CCCC:\n") == []


def test_neuron_key_check_needs_gpg(tmp_path: Path) -> None:
    runner = neuron_runner()
    runner.respond[("gpg", "--batch")] = (127, "")
    node = trn1_node(tmp_path, runner)
    write_keyring(node)
    with pytest.raises(StepFailed, match="gpg is needed to check the Neuron repository key"):
        NeuronSoftware().keyring_ok(node)


def test_neuron_only_the_package_off_its_pin_is_installed(tmp_path: Path) -> None:
    runner = neuron_runner()
    node = trn1_node(tmp_path, runner)
    step = NeuronSoftware()
    step.apply(node)
    runner.respond[("dpkg-query", "-W", "-f=${Status}|${Version}", "aws-neuronx-tools")] = (
        0,
        "install ok installed|2.31.15.0-abc",
    )
    assert step.needed(node)
    runner.commands.clear()
    step.apply(node)
    installs = [c for c in runner.ran("apt-get") if "install" in c]
    assert installs == [
        [
            "apt-get",
            *APT_OPTIONS,
            "install",
            "-y",
            "--no-install-recommends",
            "--allow-downgrades",
            "aws-neuronx-tools=2.28.23.0*",
        ]
    ]
    assert not runner.ran("curl")  # keyring already there


def test_neuron_ls_failing_is_a_clear_failure(tmp_path: Path) -> None:
    node = trn1_node(tmp_path, neuron_runner(neuron_ls_rc=1))
    with pytest.raises(StepFailed, match=r"neuron-ls failed after installing Neuron 2\.28\.1.*dmesg"):
        NeuronSoftware().apply(node)


def test_neuron_needs_an_ubuntu_codename(tmp_path: Path) -> None:
    runner = neuron_runner()
    node = trn1_node(tmp_path, runner, codename=None)
    step = NeuronSoftware()
    assert step.needed(node)
    assert step.describe(node) == ["FAIL: /etc/os-release has no VERSION_CODENAME (needs Ubuntu)"]
    with pytest.raises(StepFailed, match="no VERSION_CODENAME"):
        step.apply(node)
    assert not runner.ran("apt-get")


def test_neuron_describe(tmp_path: Path) -> None:
    node = trn1_node(tmp_path, neuron_runner())
    actions = NeuronSoftware().describe(node)
    assert (
        actions[0]
        == "curl https://apt.repos.neuron.amazonaws.com/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB > "
        + NEURON_KEYRING
        + f" (gpg --show-keys must show only key {NEURON_KEY_FINGERPRINT})"
    )
    assert actions[1].startswith("write /etc/apt/sources.list.d/neuron.list: deb [signed-by=")
    assert "aws-neuronx-runtime-lib=2.30.51.0*" in actions[3]
    assert actions[-1] == "verify: " + NEURON_LS


@pytest.mark.parametrize(
    ("installed", "pinned", "ok"),
    [
        ("2.26.10.0", "2.26.10.0", True),
        ("2.26.10.0-1a2b3c", "2.26.10.0", True),
        ("2.26.10.01", "2.26.10.0", False),
        ("2.26.10.0.1", "2.26.10.0", False),
        ("2.26.1", "2.26.10.0", False),
        (None, "2.26.10.0", False),
    ],
)
def test_version_matches(installed: str | None, pinned: str, ok: bool) -> None:
    assert version_matches(installed, pinned) is ok
