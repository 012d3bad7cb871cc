"""runtime.containers.install_missing on fake roots: the exact commands, the sha256 checks, what is skipped.

Downloads are played by a runner hook that writes the bytes ``curl --output`` would; ``make install`` by one that
writes pyxis's plugin. The pins' own figures are replaced with the sums of those bytes (monkeypatch), except in the
tests that check a wrong or missing sum is refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from runtime_fakes import RecordingRunner, fake_node, touch
from training_runtime import pins
from training_runtime.errors import StepFailed
from training_runtime.node import Node
from training_runtime.plan import apply_plan, describe_plan
from training_runtime.steps import container_install
from training_runtime.steps.container_install import DOWNLOADS, ContainerInstall
from training_runtime.steps.containers import container_steps

ENROOT_DEB = b"enroot package bytes"
CAPS_DEB = b"enroot+caps package bytes"
WRONG = "0" * 64


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pyxis_archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in (("pyxis-0.24.0/Makefile", b"all:\n"), ("pyxis-0.24.0/pyxis.conf.in", b"x\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


PYXIS = pyxis_archive()
BODIES = {"enroot_3.4.1-1_amd64.deb": ENROOT_DEB, "enroot+caps_3.4.1-1_amd64.deb": CAPS_DEB, "v0.24.0.tar.gz": PYXIS}


def node_for(root: Path, *, hyperpod: bool = True, sums: bool = True, bodies: dict[str, bytes] = BODIES) -> Node:
    options: dict[str, object] = {"install_missing": True}
    options.update(enroot_sha256=sha(ENROOT_DEB), enroot_caps_sha256=sha(CAPS_DEB))
    node = fake_node(root, fsx=False, options={"containers": options})
    if not sums:  # past the config's rule (RT-CONTAINERS-INSTALL): the step refuses on its own too
        containers = dataclasses.replace(node.options.containers, enroot_sha256=None, enroot_caps_sha256=None)
        node.options = dataclasses.replace(node.options, containers=containers)
    if hyperpod:
        (root / "opt/sagemaker_cluster").mkdir(parents=True, exist_ok=True)
        touch(root, "/opt/slurm/include/slurm/spank.h", "/* spank */\n")
    runner = node.runner
    assert isinstance(runner, RecordingRunner)

    def play(argv: list[str]) -> None:
        if argv[0] == "curl":
            Path(argv[argv.index("--output") + 1]).write_bytes(bodies[argv[-1].rsplit("/", 1)[1]])
        elif argv[0] == "apt-get" and any(a.endswith("enroot_3.4.1-1_amd64.deb") for a in argv):
            touch(root, "/usr/bin/enroot", "#!/bin/sh\n")
        elif argv[0] == "make" and "install" in argv:
            touch(root, "/usr/local/lib/slurm/spank_pyxis.so", "ELF")

    runner.hooks.append(play)
    return node


@pytest.fixture(autouse=True)
def pyxis_pin(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pyxis pin with the test archive's sum (its real sum is for the real archive)."""
    monkeypatch.setattr(container_install, "PYXIS_SOURCE", pins.Artifact("pyxis", pins.PYXIS_SOURCE.url, sha(PYXIS)))


def commands(node: Node) -> list[list[str]]:
    runner = node.runner
    assert isinstance(runner, RecordingRunner)
    return runner.commands


def test_a_bare_hyperpod_node_gets_enroot_and_pyxis_with_the_exact_commands(tmp_path: Path) -> None:
    node = node_for(tmp_path)
    [row] = describe_plan(node, [ContainerInstall()])
    assert row["actions"] == [
        "download enroot 3.4.1 packages (sha256-checked), apt-get install squashfs-tools parallel fuse-overlayfs "
        "squashfuse and them",
        "build pyxis 0.24.0 (sha256-checked source) against /opt/slurm/include, install it into /usr/local",
    ]
    apply_plan(node, [ContainerInstall()])
    downloads = str(tmp_path / DOWNLOADS.lstrip("/"))
    tree = str(tmp_path / "var/lib/hyperpod-cdk/build/pyxis-0.24.0")
    ran = commands(node)
    curls = [c for c in ran if c[0] == "curl"]
    assert [c[-1] for c in curls] == [a.url for a in (*pins.ENROOT_DEBS, pins.PYXIS_SOURCE)]
    installs = [c for c in ran if c[0] == "apt-get" and "install" in c]
    assert installs[0][-6:] == [
        "squashfs-tools",
        "parallel",
        "fuse-overlayfs",
        "squashfuse",
        f"{downloads}/enroot_3.4.1-1_amd64.deb",
        f"{downloads}/enroot+caps_3.4.1-1_amd64.deb",
    ]
    assert installs[1][-2:] == ["gcc", "make"]  # the fake root has neither
    assert [c for c in ran if c[0] == "make"] == [
        ["make", "-C", tree],
        ["make", "-C", tree, "install", "prefix=/usr/local"],
    ]
    assert not ContainerInstall().needed(node)
    assert Path(tree, "Makefile").read_bytes() == b"all:\n"  # the verified archive, unpacked


def test_the_build_uses_the_nodes_own_slurm_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    node = node_for(tmp_path)
    runner = node.runner
    original = runner.run

    def run(argv, **kwargs):  # type: ignore[no-untyped-def]
        if argv[0] == "make":
            seen.append(kwargs.get("env"))
        return original(argv, **kwargs)

    monkeypatch.setattr(runner, "run", run)
    touch(tmp_path, "/usr/bin/enroot", "#!/bin/sh\n")  # enroot present: only pyxis is built
    apply_plan(node, [ContainerInstall()])
    assert seen == [{"CPPFLAGS": "-I/opt/slurm/include"}] * 2
    assert [c[-1] for c in commands(node) if c[0] == "curl"] == [pins.PYXIS_SOURCE.url]


def test_a_wrong_sha256_is_refused_deleted_and_nothing_installed(tmp_path: Path) -> None:
    node = node_for(tmp_path, bodies={**BODIES, "enroot_3.4.1-1_amd64.deb": b"a different file"})
    with pytest.raises(StepFailed, match=r"enroot_3.4.1-1_amd64.deb: sha256 [0-9a-f]{64} but the pin 'enroot' expects"):
        ContainerInstall().apply(node)
    assert not (tmp_path / DOWNLOADS.lstrip("/") / "enroot_3.4.1-1_amd64.deb").exists()
    assert not [c for c in commands(node) if c[0] == "apt-get"]


def test_a_wrong_pyxis_archive_is_refused_before_the_build(tmp_path: Path) -> None:
    node = node_for(tmp_path, bodies={**BODIES, "v0.24.0.tar.gz": b"not the archive"})
    touch(tmp_path, "/usr/bin/enroot", "#!/bin/sh\n")
    with pytest.raises(StepFailed, match=r"the pin 'pyxis' expects"):
        ContainerInstall().apply(node)
    assert not [c for c in commands(node) if c[0] in ("make", "apt-get")]


def test_no_sum_for_the_enroot_packages_refuses_before_any_download(tmp_path: Path) -> None:
    node = node_for(tmp_path, sums=False)
    with pytest.raises(StepFailed, match=r"the pin 'enroot' in training_runtime/pins.py has no sha256.*enroot_sha256"):
        ContainerInstall().apply(node)
    assert commands(node) == []


def test_the_enroot_pins_have_no_invented_sum_and_the_pyxis_pin_is_a_sha256() -> None:
    assert [(a.name, a.sha256, a.option) for a in pins.ENROOT_DEBS] == [
        ("enroot", None, "enroot_sha256"),
        ("enroot+caps", None, "enroot_caps_sha256"),
    ]
    assert pins.PYXIS_SOURCE.sha256 == "9c4cdb79a67301d8ea05951aa4d2c205f40cf6145e338214b0191add8b36d6c4"


def test_a_debian_node_installs_libslurm_dev_for_the_headers(tmp_path: Path) -> None:
    node = node_for(tmp_path, hyperpod=False)
    touch(tmp_path, "/usr/bin/enroot", "#!/bin/sh\n")
    apply_plan(node, [ContainerInstall()])
    installs = [c for c in commands(node) if c[0] == "apt-get" and "install" in c]
    assert [i[-3:] for i in installs] == [["gcc", "make", "libslurm-dev"]]


def test_a_hyperpod_node_without_headers_fails_with_the_fix(tmp_path: Path) -> None:
    node = node_for(tmp_path)
    (tmp_path / "opt/slurm/include/slurm/spank.h").unlink()
    touch(tmp_path, "/usr/bin/enroot", "#!/bin/sh\n")
    with pytest.raises(StepFailed, match=r"no Slurm headers at /opt/slurm/include/slurm/spank.h"):
        ContainerInstall().apply(node)


def test_what_the_node_has_is_not_installed_again(tmp_path: Path) -> None:
    node = node_for(tmp_path, sums=False)  # no sums needed: nothing is downloaded
    touch(tmp_path, "/usr/bin/enroot", "#!/bin/sh\n")
    touch(tmp_path, "/opt/slurm/lib/slurm/spank_pyxis.so", "ELF")
    assert not ContainerInstall().needed(node)
    assert apply_plan(node, [ContainerInstall()]) == 0 and commands(node) == []
    assert ContainerInstall().left_alone(node) == [
        "/usr/bin/enroot: already on the node, not installed again",
        "/opt/slurm/lib/slurm/spank_pyxis.so: already on the node, not installed again",
    ]


def test_install_then_tune_then_register_in_one_plan(tmp_path: Path) -> None:
    node = node_for(tmp_path)
    touch(tmp_path, "/proc/self/mountinfo", "36 1 98:0 / /opt/dlami/nvme rw - ext4 /dev/x rw\n")
    runner = node.runner
    assert isinstance(runner, RecordingRunner)
    runner.hooks.append(
        lambda argv: (
            touch(tmp_path, "/etc/enroot/enroot.conf", "ENROOT_RUNTIME_PATH ${XDG_RUNTIME_DIR}/enroot\n")
            if argv[0] == "apt-get" and "install" in argv and argv[-1].endswith(".deb")
            else None
        )
    )
    steps = container_steps(node)
    assert [s.name for s in steps] == ["containers-install", "enroot-paths", "pyxis-plugstack"]
    apply_plan(node, steps)
    assert (
        "ENROOT_RUNTIME_PATH /opt/dlami/nvme/tmp/enroot/user-$(id -u)\n"
        in (tmp_path / "etc/enroot/enroot.conf").read_text()
    )
    assert (tmp_path / "opt/slurm/etc/plugstack.conf.d/pyxis.conf").read_text() == (
        "required /usr/local/lib/slurm/spank_pyxis.so\n"
    )
    assert apply_plan(node, container_steps(node)) == 0


def test_an_archive_member_outside_the_build_directory_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("pyxis-0.24.0/escape")
        info.type, info.linkname = tarfile.SYMTYPE, "../../../../etc/passwd"
        tar.addfile(info)
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(buffer.getvalue())
    (tmp_path / "build").mkdir()
    with pytest.raises(StepFailed, match=r"member 'pyxis-0.24.0/escape' leaves the build directory"):
        container_install._safe_extract(archive, tmp_path / "build")
    assert list((tmp_path / "build").iterdir()) == []
