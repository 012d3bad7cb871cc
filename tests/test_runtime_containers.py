"""runtime.containers on fake roots: enroot's paths, Docker's data-root, pyxis in plugstack.conf, ConstrainDevices.

Every case builds the node's files under a temporary root (the AMI's, an older AMI's, a bare node's) with a mount
table, and checks the exact files the steps leave and that a second run changes nothing.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from runtime_fakes import RecordingRunner, fake_node, touch
from training_runtime.errors import StepFailed
from training_runtime.node import Node
from training_runtime.options import options_problems
from training_runtime.plan import apply_plan, describe_plan
from training_runtime.retry import RetryPolicy
from training_runtime.steps import container_paths
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.containers import (
    PUSH_PENDING,
    DockerDataRoot,
    EnrootPaths,
    container_push_steps,
    container_steps,
)

ETC = "/opt/slurm/etc"
CONF = "/etc/enroot/enroot.conf"
NVME = "/opt/dlami/nvme"
AMI_ENROOT = (  # as the 2026 AMI writes it (AWS's sample's NVMe values) with keys that are not ours
    "ENROOT_RUNTIME_PATH /opt/dlami/nvme/tmp/enroot/user-$(id -u)\n"
    "ENROOT_CONFIG_PATH ${HOME}/enroot\n"
    "ENROOT_CACHE_PATH /opt/dlami/nvme/enroot\n"
    "ENROOT_DATA_PATH /opt/dlami/nvme/tmp/enroot/data/user-$(id -u)\n"
    "ENROOT_TEMP_PATH /opt/dlami/nvme/tmp\n"
    "ENROOT_SQUASH_OPTIONS -comp lzo -noI -noD -noF -noX -no-duplicates\n"
    "ENROOT_MOUNT_HOME no\n"
)
PACKAGE_ENROOT = (  # enroot's own package defaults: everything on the root volume
    "#ENROOT_LIBRARY_PATH        /usr/lib/enroot\n"
    "ENROOT_RUNTIME_PATH        ${XDG_RUNTIME_DIR}/enroot\n"
    "ENROOT_CACHE_PATH          ${XDG_CACHE_HOME}/enroot\n"
    "ENROOT_DATA_PATH           ${XDG_DATA_HOME}/enroot\n"
    "#ENROOT_TEMP_PATH          ${TMPDIR:-/tmp}\n"
    "ENROOT_ROOTFS_WRITABLE     yes\n"
)


def mounts(root: Path, *paths: str) -> None:
    touch(
        root, "/proc/self/mountinfo", "".join(f"3{i} 1 98:0 / {p} rw - ext4 /dev/x rw\n" for i, p in enumerate(paths))
    )


def hyperpod(root: Path, *, instance: str = "workers-1", fsx: bool = False, **options: object) -> Node:
    node = fake_node(root, instance=instance, fsx=fsx, options={"containers": options} if options else None)
    (root / "opt/sagemaker_cluster").mkdir(parents=True, exist_ok=True)
    touch(root, ETC + "/slurm.conf", "SlurmctldHost=ip-10-1-0-10\n")
    return node


def enroot(root: Path, conf: str) -> None:
    touch(root, "/usr/bin/enroot", "#!/bin/sh\n").chmod(0o755)
    touch(root, CONF, conf)


def converge(node: Node) -> int:
    """Apply the node's container steps; a second run must change nothing."""
    changed = apply_plan(node, container_steps(node))
    assert apply_plan(node, container_steps(node)) == 0
    return changed


def test_the_amis_nvme_values_are_kept_byte_for_byte(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    enroot(tmp_path, AMI_ENROOT)
    mounts(tmp_path, NVME)
    converge(node)
    assert (tmp_path / CONF.lstrip("/")).read_text() == AMI_ENROOT
    for directory in ("tmp", "tmp/enroot", "tmp/enroot/data", "enroot"):  # the directories its values name
        assert stat.S_IMODE((tmp_path / "opt/dlami/nvme" / directory).stat().st_mode) == 0o1777, directory
    [row] = describe_plan(node, [EnrootPaths()])
    assert "ENROOT_CACHE_PATH /opt/dlami/nvme/enroot kept" in row["left_alone"]


def test_root_volume_paths_move_to_nvme_editing_only_our_keys(tmp_path: Path) -> None:
    node = hyperpod(tmp_path, fsx=True)  # auto: the instance store first, even with a shared file system
    enroot(tmp_path, PACKAGE_ENROOT)
    mounts(tmp_path, NVME, "/opt/sagemaker", "/fsx")
    [row] = describe_plan(node, [EnrootPaths()])
    assert (
        row["actions"][0]
        == f"set ENROOT_RUNTIME_PATH {NVME}/tmp/enroot/user-$(id -u) in {CONF} (was ${{XDG_RUNTIME_DIR}}/enroot)"
    )
    converge(node)
    assert (tmp_path / CONF.lstrip("/")).read_text() == (
        "#ENROOT_LIBRARY_PATH        /usr/lib/enroot\n"
        "ENROOT_RUNTIME_PATH /opt/dlami/nvme/tmp/enroot/user-$(id -u)\n"
        "ENROOT_CACHE_PATH /opt/dlami/nvme/enroot\n"
        "ENROOT_DATA_PATH /opt/dlami/nvme/tmp/enroot/data/user-$(id -u)\n"
        "ENROOT_TEMP_PATH /opt/dlami/nvme/tmp\n"  # the commented default, set in place
        "ENROOT_ROOTFS_WRITABLE     yes\n"
    )


def test_without_nvme_the_sagemaker_volume_and_the_shared_cache_are_used(tmp_path: Path) -> None:
    node = hyperpod(tmp_path, fsx=True)  # auto without NVMe: the shared file system before the small volume
    enroot(tmp_path, PACKAGE_ENROOT)
    mounts(tmp_path, "/opt/sagemaker", "/fsx")
    (tmp_path / "opt/dlami/nvme").mkdir(parents=True)  # a directory on the root volume is not the instance store
    converge(node)
    text = (tmp_path / CONF.lstrip("/")).read_text()
    assert "ENROOT_DATA_PATH /opt/sagemaker/tmp/enroot/data/user-$(id -u)\n" in text
    assert "ENROOT_CACHE_PATH /fsx/enroot\n" in text and "/opt/dlami/nvme" not in text
    assert stat.S_IMODE((tmp_path / "fsx/enroot").stat().st_mode) == 0o1777


def test_an_nvme_value_without_a_mounted_instance_store_moves(tmp_path: Path) -> None:
    node = hyperpod(tmp_path, enroot_cache="nvme")
    enroot(tmp_path, AMI_ENROOT)
    mounts(tmp_path, "/opt/sagemaker")  # /opt/dlami/nvme is no mount: its directory would be on the root volume
    converge(node)
    assert "ENROOT_CACHE_PATH /opt/sagemaker/enroot\n" in (tmp_path / CONF.lstrip("/")).read_text()


@pytest.mark.parametrize("mounted", [True, False])
def test_a_booting_instance_store_is_waited_for_before_anything_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mounted: bool
) -> None:
    monkeypatch.setattr(container_paths, "NVME_WAIT", RetryPolicy(attempts=3, base_s=0.0, cap_s=0.0, deadline_s=5.0))
    node = hyperpod(tmp_path)
    enroot(tmp_path, AMI_ENROOT)
    mounts(tmp_path, "/opt/sagemaker")  # the EBS volume is there; the DLAMI's unit has not mounted NVMe yet
    touch(tmp_path, "/lib/systemd/system/dlami-nvme.service", "[Unit]\n")
    runner = node.runner
    assert isinstance(runner, RecordingRunner)
    answers = iter(["ActiveState=activating\nExecMainStatus=0\n", "ActiveState=active\nExecMainStatus=0\n"])

    def unit(argv: list[str]) -> None:
        if argv[:3] == ["systemctl", "show", "dlami-nvme.service"]:
            answer = next(answers, "ActiveState=active\nExecMainStatus=0\n")
            runner.respond[tuple(argv)] = (0, answer)
            if mounted and answer.startswith("ActiveState=active"):
                mounts(tmp_path, "/opt/sagemaker", NVME)

    runner.hooks.append(unit)
    apply_plan(node, [EnrootPaths()])
    text = (tmp_path / CONF.lstrip("/")).read_text()
    assert len(runner.ran("systemctl", "show", "dlami-nvme.service")) == 2  # waited until the unit was done
    if mounted:  # the AMI's NVMe values stay: the instance store came up
        assert text == AMI_ENROOT
    else:  # the unit finished without a mount: AWS's fallback
        assert "ENROOT_RUNTIME_PATH /opt/sagemaker/tmp/enroot/user-$(id -u)\n" in text


def test_with_no_volume_off_the_root_nothing_moves_and_the_plan_warns(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    enroot(tmp_path, PACKAGE_ENROOT)
    assert converge(node) == 0
    assert (tmp_path / CONF.lstrip("/")).read_text() == PACKAGE_ENROOT
    [row] = describe_plan(node, [EnrootPaths()])
    assert row["needed"] is False
    assert row["left_alone"][-1].startswith(
        "WARNING: ENROOT_RUNTIME_PATH, ENROOT_CACHE_PATH, ENROOT_DATA_PATH, ENROOT_TEMP_PATH not moved"
    )


def test_the_shared_cache_option_moves_only_the_cache(tmp_path: Path) -> None:
    node = hyperpod(tmp_path, fsx=True, enroot_cache="shared")
    enroot(tmp_path, AMI_ENROOT)
    mounts(tmp_path, NVME, "/fsx")
    converge(node)
    assert (tmp_path / CONF.lstrip("/")).read_text() == AMI_ENROOT.replace(
        "ENROOT_CACHE_PATH /opt/dlami/nvme/enroot", "ENROOT_CACHE_PATH /fsx/enroot"
    )
    auto = hyperpod(tmp_path / "auto", fsx=True)
    enroot(tmp_path / "auto", AMI_ENROOT)
    mounts(tmp_path / "auto", NVME, "/fsx")
    converge(auto)  # auto keeps the AMI's cache where it is, off the root volume
    assert (tmp_path / "auto" / CONF.lstrip("/")).read_text() == AMI_ENROOT


def test_a_missing_key_is_appended_once(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    enroot(tmp_path, "ENROOT_MOUNT_HOME no")  # no newline at the end
    mounts(tmp_path, NVME)
    converge(node)
    text = (tmp_path / CONF.lstrip("/")).read_text()
    assert text.startswith("ENROOT_MOUNT_HOME no\nENROOT_RUNTIME_PATH /opt/dlami/nvme/tmp/enroot/user-$(id -u)\n")
    assert text.count("ENROOT_CACHE_PATH") == 1


DAEMON_JSON = '{\n  "log-driver": "json-file",\n  "runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}\n}\n'


def docker(root: Path, daemon_json: str | None = DAEMON_JSON) -> None:
    touch(root, "/usr/bin/docker", "#!/bin/sh\n").chmod(0o755)
    if daemon_json is not None:
        touch(root, "/etc/docker/daemon.json", daemon_json)


def test_docker_data_root_is_merged_other_keys_kept_and_docker_restarted(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    docker(tmp_path)
    mounts(tmp_path, NVME)
    (tmp_path / "run/systemd/system").mkdir(parents=True)
    assert [s.name for s in container_steps(node)] == ["docker-data-root"]
    converge(node)
    data = json.loads((tmp_path / "etc/docker/daemon.json").read_text())
    assert list(data) == ["log-driver", "runtimes", "data-root"]
    assert data["runtimes"] == {"nvidia": {"path": "nvidia-container-runtime"}}
    assert data["data-root"] == "/opt/dlami/nvme/docker/data-root"
    runner = node.runner
    assert isinstance(runner, RecordingRunner)
    assert runner.ran("systemctl", "restart", "docker") == [["systemctl", "restart", "docker"]]  # once: converged


def test_docker_data_root_already_off_the_root_volume_is_kept(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    kept = '{"data-root": "/opt/dlami/nvme/docker"}'
    docker(tmp_path, kept)
    mounts(tmp_path, NVME)
    assert converge(node) == 0
    assert (tmp_path / "etc/docker/daemon.json").read_text() == kept
    assert describe_plan(node, [DockerDataRoot()])[0]["left_alone"] == ["docker data-root /opt/dlami/nvme/docker kept"]


def test_a_daemon_json_that_is_not_json_is_refused_not_replaced(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    docker(tmp_path, "{ not json")
    mounts(tmp_path, NVME)
    with pytest.raises(StepFailed, match=r"daemon.json is not valid JSON .* never replaces it"):
        DockerDataRoot().needed(node)
    assert (tmp_path / "etc/docker/daemon.json").read_text() == "{ not json"


def test_docker_off_leaves_daemon_json_alone(tmp_path: Path) -> None:
    node = hyperpod(tmp_path, docker_data_root=False)
    docker(tmp_path, None)
    mounts(tmp_path, NVME)
    assert container_steps(node) == []


def pyxis(root: Path, plugin: str = "/usr/local/lib/slurm/spank_pyxis.so") -> None:
    touch(root, plugin, "ELF")


def test_a_wildcard_include_is_made_explicit_and_pyxis_registered_once(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    pyxis(tmp_path)
    touch(tmp_path, ETC + "/plugstack.conf", "# site plugins\ninclude /opt/slurm/etc/plugstack.conf.d/*\n")
    touch(tmp_path, ETC + "/plugstack.conf.d/b.conf", "optional /usr/lib/b.so\n")
    touch(tmp_path, ETC + "/plugstack.conf.d/a.conf", "optional /usr/lib/a.so\n")
    [row] = [r for r in describe_plan(node, container_steps(node)) if r["step"] == "pyxis-plugstack"]
    assert row["actions"] == [
        f"edit {ETC}/plugstack.conf: make `include {ETC}/plugstack.conf.d/*` explicit; "
        "include plugstack.conf.d/pyxis.conf",
        f"write {ETC}/plugstack.conf.d/pyxis.conf (required /usr/local/lib/slurm/spank_pyxis.so)",
    ]
    converge(node)
    assert (tmp_path / "opt/slurm/etc/plugstack.conf").read_text() == (
        "# site plugins\n"
        "# hyperpod-cdk: `include /opt/slurm/etc/plugstack.conf.d/*` made explicit (configless Slurm cannot expand "
        "wildcards)\n"
        "include /opt/slurm/etc/plugstack.conf.d/a.conf\n"
        "include /opt/slurm/etc/plugstack.conf.d/b.conf\n"
        "include /opt/slurm/etc/plugstack.conf.d/pyxis.conf\n"
    )
    pyxis_conf = tmp_path / "opt/slurm/etc/plugstack.conf.d/pyxis.conf"
    assert pyxis_conf.read_text() == "required /usr/local/lib/slurm/spank_pyxis.so\n"


def test_pyxis_registered_by_the_ami_is_not_registered_again(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    pyxis(tmp_path, "/opt/slurm/lib/slurm/spank_pyxis.so")
    direct = "required /opt/slurm/lib/slurm/spank_pyxis.so\n"  # the DLAMI's direct line (AWS's sample's detection)
    touch(tmp_path, ETC + "/plugstack.conf", direct)
    assert converge(node) == 0
    assert (tmp_path / "opt/slurm/etc/plugstack.conf").read_text() == direct
    assert not (tmp_path / "opt/slurm/etc/plugstack.conf.d").exists()
    [row] = [r for r in describe_plan(node, container_steps(node)) if r["step"] == "pyxis-plugstack"]
    assert row["left_alone"] == [f"pyxis: loaded by {ETC}/plugstack.conf (not registered again)"]


def test_pyxis_without_a_plugstack_gets_one_with_an_explicit_include(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    pyxis(tmp_path)
    converge(node)
    assert (tmp_path / "opt/slurm/etc/plugstack.conf").read_text() == (
        "include /opt/slurm/etc/plugstack.conf.d/pyxis.conf\n"
    )


def test_enroot_without_pyxis_registers_nothing(tmp_path: Path) -> None:
    node = hyperpod(tmp_path)
    enroot(tmp_path, AMI_ENROOT)
    mounts(tmp_path, NVME)
    assert [s.name for s in container_steps(node)] == ["enroot-paths"]
    converge(node)
    assert not (tmp_path / "opt/slurm/etc/plugstack.conf").exists()


def controller(root: Path, cgroup: str | None) -> Node:
    node = hyperpod(root, instance="controller-1")
    pyxis(root, "/opt/slurm/lib/slurm/spank_pyxis.so")
    touch(root, ETC + "/plugstack.conf", "include /opt/slurm/etc/plugstack.conf.d/*\n")
    touch(root, ETC + "/plugstack.conf.d/pyxis.conf", "required /opt/slurm/lib/slurm/spank_pyxis.so\n")
    if cgroup is not None:
        touch(root, ETC + "/cgroup.conf", cgroup)
    return node


def test_the_controller_constrains_devices_and_pushes_once(tmp_path: Path) -> None:
    node = controller(tmp_path, "CgroupPlugin=autodetect\nConstrainCores=yes")
    steps = container_steps(node) + container_push_steps(node)
    assert [s.name for s in steps] == ["pyxis-plugstack", "cgroup-constrain-devices", "containers-configless-push"]
    assert apply_plan(node, steps) == 3
    assert (tmp_path / "opt/slurm/etc/cgroup.conf").read_text() == (
        "CgroupPlugin=autodetect\nConstrainCores=yes\nConstrainDevices=yes\n"
    )
    assert (
        (tmp_path / "opt/slurm/etc/plugstack.conf")
        .read_text()
        .endswith("include /opt/slurm/etc/plugstack.conf.d/pyxis.conf\n")
    )
    runner = node.runner
    assert isinstance(runner, RecordingRunner)
    assert runner.ran("/opt/slurm/bin/scontrol", "reconfigure") == [["/opt/slurm/bin/scontrol", "reconfigure"]]
    assert not (tmp_path / PUSH_PENDING.lstrip("/")).exists()
    assert apply_plan(node, steps) == 0 and len(runner.ran("/opt/slurm/bin/scontrol")) == 1


def test_an_explicit_constrain_devices_and_an_absent_cgroup_conf_are_left_alone(tmp_path: Path) -> None:
    node = controller(tmp_path, "ConstrainDevices=no\n")
    touch(tmp_path, ETC + "/plugstack.conf", "include /opt/slurm/etc/plugstack.conf.d/pyxis.conf\n")
    steps = container_steps(node) + container_push_steps(node)
    assert apply_plan(node, steps) == 0  # nothing changed: nothing pushed
    assert (tmp_path / "opt/slurm/etc/cgroup.conf").read_text() == "ConstrainDevices=no\n"
    none = controller(tmp_path / "none", None)
    assert [r["left_alone"] for r in describe_plan(none, container_steps(none)) if r["step"].startswith("cgroup")] == [
        [f"{ETC}/cgroup.conf: none on this node, not created"]
    ]
    assert not (tmp_path / "none/opt/slurm/etc/cgroup.conf").exists()


def test_the_catalog_places_the_steps_before_the_daemons_and_the_push_after(tmp_path: Path) -> None:
    node = controller(tmp_path, "ConstrainCores=yes\n")
    names = [s.name for s in steps_for(node)]
    assert names.index("slurm-config") < names.index("pyxis-plugstack") < names.index("daemon:slurmctld")
    assert names.index("daemon:slurmctld") < names.index("containers-configless-push")
    off = hyperpod(tmp_path / "off", instance="controller-1", enabled=False)
    pyxis(tmp_path / "off")
    assert not {"pyxis-plugstack", "containers-configless-push"} & {s.name for s in steps_for(off)}


def test_generic_nodes_tune_too_but_never_push(tmp_path: Path) -> None:
    node = fake_node(tmp_path, instance="controller-1")
    pyxis(tmp_path)
    enroot(tmp_path, PACKAGE_ENROOT)
    mounts(tmp_path, NVME)
    assert [s.name for s in container_steps(node) + container_push_steps(node)] == ["enroot-paths", "pyxis-plugstack"]
    converge(node)
    assert (tmp_path / "etc/slurm/plugstack.conf").read_text() == "include /etc/slurm/plugstack.conf.d/pyxis.conf\n"


@pytest.mark.parametrize(
    ("containers", "fragment"),
    [
        ({"enroot_cache": "fsx"}, "options.containers.enroot_cache: got 'fsx'; allowed: auto, nvme, shared"),
        ({"enroot_sha256": "ABC"}, "options.containers.enroot_sha256: got 'ABC'; expected a sha256"),
        ({"install_missing": True, "enabled": False}, "install_missing applies only with enabled: true"),
        ({"install_missing": True}, "options.containers.enroot_sha256: got None; install_missing downloads"),
        ({"docker": True}, "options.containers.docker: unknown option"),
    ],
)
def test_option_problems_name_the_field_and_the_fix(containers: dict[str, object], fragment: str) -> None:
    messages = [str(p) for p in options_problems({"containers": containers})]
    assert any(fragment in m for m in messages), messages


def test_install_with_both_sums_is_accepted() -> None:
    sums = {"enroot_sha256": "a" * 64, "enroot_caps_sha256": "b" * 64}
    assert options_problems({"containers": {"install_missing": True, **sums}}) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory only root writes needs root")
def test_a_link_planted_in_the_world_writable_scratch_directory_is_never_followed(tmp_path: Path) -> None:
    """/opt/dlami/nvme/tmp is 1777 (AWS's sample): a user's link there at enroot's directory must not make root
    create and chmod 1777 a directory wherever it points (issue 39 item 2)."""
    node = hyperpod(tmp_path)
    enroot(tmp_path, AMI_ENROOT)
    mounts(tmp_path, NVME)
    scratch = tmp_path / "opt/dlami/nvme/tmp"
    scratch.mkdir(parents=True)
    scratch.chmod(0o1777)
    system = tmp_path / "etc/cron.d"  # a root-owned directory the user cannot write
    system.mkdir(parents=True)
    os.chown(str(tmp_path), 0, 0)
    (scratch / "enroot").symlink_to(system)
    with pytest.raises(StepFailed, match=r"/opt/dlami/nvme/tmp/enroot is a symbolic link: left as it is"):
        EnrootPaths().apply(node)
    assert stat.S_IMODE(system.stat().st_mode) == 0o755 and list(system.iterdir()) == []
