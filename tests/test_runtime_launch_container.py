"""The launcher's container path (``launch --container-image``): pyxis's srun options per platform and family,
the environment that must reach the container, mounts, bad options, and the example job script.

No container runs here: enroot and pyxis are not packaged for Debian and cannot be downloaded. What runs is
the srun line the launcher builds, checked option by option against pyxis's documented options, and the
on-node stage's entry executed the way srun would start it in an image (a stand-in srun that drops the
``--container-*`` options and gives the step an image's environment)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from test_runtime_launch import FAMILY_CASES, JOB, command, dry_run, exports, facts, root_with
from training_runtime.facts import NodeFacts
from training_runtime.launch import (
    EFA_LIBRARY_PATH,
    NVIDIA_EFA,
    PACKAGE_PARENT,
    PATH_LIKE,
    Launch,
    build,
    parse,
)
from training_runtime.launch_container import ENTRY, ContainerError, container_from, node_environment

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
JOBS = ROOT / "examples" / "jobs"
IMAGE = "nvcr.io#nvidia/pytorch:24.12-py3"
RUNTIME_MOUNT = f"{PACKAGE_PARENT}:{PACKAGE_PARENT}:ro"
ON_NODE_ENTRY = ["python3", "-c", ENTRY.format(PACKAGE_PARENT)]


def launch(
    tmp_path: Path, node: NodeFacts, *argv: str, cwd: str = "/fsx/code", files: tuple[str, ...] = (), **env: str
) -> Launch:
    """build() for this node's facts, with ``files`` present on the node (paths under ``tmp_path`` as root)."""
    root = root_with(tmp_path, node)
    for name in files:
        (root / name.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / name.lstrip("/")).write_bytes(b"hsqs")
    return build(parse(list(argv)), {**JOB, **env}, node, root, cwd=cwd)


def option(srun: list[str], name: str) -> str | None:
    values = [part.split("=", 1)[1] for part in srun if part.startswith(name + "=")]
    assert len(values) <= 1, srun
    return values[0] if values else None


P5 = facts("ml.p5.48xlarge", platform="hyperpod", gpus=8, efa_interfaces=32)
TRN1 = facts("ml.trn1.32xlarge", neuron_devices=16, neuron_cores=32, efa_interfaces=8)
CPU = facts("ml.c5.4xlarge", cpus=16)


def test_hyperpod_p5_keeps_auto_resume_and_passes_the_efa_environment_into_the_image(tmp_path: Path) -> None:
    result = launch(tmp_path, P5, "--container-image", IMAGE, "--", "train.py", "--lr", "3e-4")
    assert result.srun == [
        "srun",
        "--auto-resume=1",
        "--nodes=3",
        "--ntasks=3",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        "--cpus-per-task=16",
        f"--container-image={IMAGE}",
        f"--container-mounts=/fsx:/fsx,{RUNTIME_MOUNT}",
        "--container-workdir=/fsx/code",
        "--no-container-mount-home",
        "--container-env=FI_PROVIDER,NCCL_SOCKET_IFNAME,TORCH_NCCL_ASYNC_ERROR_HANDLING",
        *ON_NODE_ENTRY,
        "--on-node",
        "--nproc-per-node=8",
        "--max-restarts=0",
        "--torchrun=torchrun",
        "--in-container",
        f"--prepend-env=LD_LIBRARY_PATH={EFA_LIBRARY_PATH}",
        f"--prepend-env=PYTHONPATH={PACKAGE_PARENT}",
        "--",
        "train.py",
        "--lr",
        "3e-4",
    ]
    # The rendezvous is the same as without a container: c10d on the first node, the job id, HyperPod's restarts.
    assert result.torchrun == [
        "torchrun",
        "--nnodes=3",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=worker-group-1-3:29400",
        "--rdzv-id=4242",
        "--max-restarts=0",
        "train.py",
        "--lr",
        "3e-4",
    ]
    # Set on the host for srun; path lists are not: they are prepended to the image's own in the container.
    assert result.environment == {k: v for k, v in NVIDIA_EFA.items() if k not in PATH_LIKE}


def test_generic_trn1_mounts_the_neuron_cache_and_disables_the_nvidia_hook(tmp_path: Path) -> None:
    image = "/fsx/images/neuron.sqsh"
    result = launch(tmp_path, TRN1, "--container-image", image, "--", "train.py", files=(image,))
    srun = result.srun
    assert not any(part.startswith("--auto-resume") for part in srun), "generic Slurm: recovery is requeue"
    assert srun[srun.index("--export=ALL") + 1 : srun.index("python3")] == [
        "--cpus-per-task=16",
        "--container-image=/fsx/images/neuron.sqsh",
        f"--container-mounts=/fsx:/fsx,{RUNTIME_MOUNT}",
        "--container-workdir=/fsx/code",
        "--no-container-mount-home",
        "--container-env=FI_EFA_FORK_SAFE,FI_EFA_USE_DEVICE_RDMA,FI_PROVIDER,MALLOC_ARENA_MAX,"
        "NEURON_COMPILE_CACHE_URL,NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS,NVIDIA_VISIBLE_DEVICES",
    ]
    assert result.environment["NEURON_COMPILE_CACHE_URL"] == "/fsx/.hyperpod-cdk/neuron-cache"
    assert result.environment["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert f"--prepend-env=LD_LIBRARY_PATH={EFA_LIBRARY_PATH}" in srun
    assert "--max-restarts=2" in srun and "--nproc-per-node=32" in srun
    assert result.notes == ()


def test_an_image_file_off_the_shared_file_system_is_pointed_out(tmp_path: Path) -> None:
    image = "/opt/images/neuron.sqsh"
    result = launch(tmp_path, TRN1, "--container-image", image, "--", "/fsx/t.py", files=(image,))
    assert result.notes == ("/opt/images/neuron.sqsh is not on the shared file system: every node needs its own copy",)


def test_generic_cpu_node_gets_no_library_path_and_no_gpu_devices(tmp_path: Path) -> None:
    result = launch(tmp_path, CPU, "--container-image", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "--", "t.py")
    srun = result.srun
    assert srun[srun.index("--cpus-per-task=16") + 1 :] == [
        "--container-image=pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
        f"--container-mounts=/fsx:/fsx,{RUNTIME_MOUNT}",
        "--container-workdir=/fsx/code",
        "--no-container-mount-home",
        "--container-env=NVIDIA_VISIBLE_DEVICES",
        *ON_NODE_ENTRY,
        "--on-node",
        "--nproc-per-node=16",
        "--max-restarts=2",
        "--torchrun=torchrun",
        "--in-container",
        f"--prepend-env=PYTHONPATH={PACKAGE_PARENT}",
        "--",
        "t.py",
    ]
    assert result.environment == {"NVIDIA_VISIBLE_DEVICES": "void"}


@pytest.mark.parametrize(("instance_type", "family", "environment", "nproc"), FAMILY_CASES)
def test_every_family_variable_keeps_the_launchers_value_in_the_container(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    instance_type: str,
    family: str,
    environment: dict[str, str],
    nproc: int,
) -> None:
    """pyxis lets an image's value win over the job's unless the name is in --container-env (pyxis env.bats)."""
    code, lines, _ = dry_run(
        tmp_path, monkeypatch, capsys, "--instance-type", instance_type, "--container-image", IMAGE, "--", "t.py"
    )
    assert code == 0
    assert lines[0].endswith(f", in container {IMAGE}")
    srun = command(lines, "srun")
    kept = set((option(srun, "--container-env") or "").split(","))
    gpus = family in ("p4d", "p5")
    assert kept == {n for n in environment if n not in PATH_LIKE} | (set() if gpus else {"NVIDIA_VISIBLE_DEVICES"})
    assert set(exports(lines)) == kept, "every variable set on the host for srun is named, and only those"
    assert ("--prepend-env=LD_LIBRARY_PATH=" + EFA_LIBRARY_PATH in srun) == ("LD_LIBRARY_PATH" in environment)
    assert f"--nproc-per-node={nproc}" in command(lines, "torchrun")


def test_emulated_hardware_says_so_in_the_container_and_has_no_gpu_hook(tmp_path: Path) -> None:
    """A p5 of the local cluster: its GPUs are declared, not present, so the image's NVIDIA hook must not run."""
    p5 = facts("ml.p5.48xlarge", gpus=8, efa_interfaces=32, emulated_hardware=True)
    result = launch(tmp_path, p5, "--container-image", IMAGE, "--", "t.py")
    assert (option(result.srun, "--container-env") or "").split(",") == [
        "FI_PROVIDER",
        "HYPERPOD_CDK_EMULATED_HARDWARE",
        "NCCL_SOCKET_IFNAME",
        "NVIDIA_VISIBLE_DEVICES",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    ]
    assert result.environment["NVIDIA_VISIBLE_DEVICES"] == "void"


def test_a_value_the_job_set_is_kept_in_the_container_too(tmp_path: Path) -> None:
    result = launch(tmp_path, P5, "--container-image", IMAGE, "--", "t.py", NCCL_SOCKET_IFNAME="^lo,docker0")
    assert "NCCL_SOCKET_IFNAME" not in result.environment
    assert "NCCL_SOCKET_IFNAME" in (option(result.srun, "--container-env") or "").split(",")


def test_without_container_image_the_line_is_unchanged(tmp_path: Path) -> None:
    """The exact line from before the container path, on HyperPod and elsewhere."""
    base = [
        "--nodes=3",
        "--ntasks=3",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        "--cpus-per-task=16",
        sys.executable,
        "-m",
        "training_runtime",
        "launch",
        "--on-node",
    ]
    hyperpod = launch(tmp_path / "a", P5, "--torchrun", "/envs/pt/bin/torchrun", "--", "t.py")
    assert hyperpod.srun == ["srun", "--auto-resume=1", *base, "--nproc-per-node=8", "--max-restarts=0",
                             "--torchrun=/envs/pt/bin/torchrun", "--", "t.py"]  # fmt: skip
    assert hyperpod.environment == {**NVIDIA_EFA, "PYTHONPATH": PACKAGE_PARENT}
    cpu = launch(tmp_path / "b", CPU, "--torchrun", "/envs/pt/bin/torchrun", "--", "t.py")
    assert cpu.srun == ["srun", *base, "--nproc-per-node=16", "--max-restarts=2", "--torchrun=/envs/pt/bin/torchrun",
                        "--", "t.py"]  # fmt: skip
    assert cpu.environment == {"PYTHONPATH": PACKAGE_PARENT}
    assert cpu.container_image is None and cpu.notes == ()


def test_mounts_keep_parents_first_and_a_users_destination_replaces_a_default(tmp_path: Path) -> None:
    result = launch(
        tmp_path, CPU, "--container-image", IMAGE, "--container-mounts",
        "/data/b:/mnt/a/b:ro,/data:/mnt/a,/lustre:/fsx", "--", "t.py",
    )  # fmt: skip
    mounts = (option(result.srun, "--container-mounts") or "").split(",")
    assert sorted(mounts) == sorted(["/data:/mnt/a", "/lustre:/fsx", RUNTIME_MOUNT, "/data/b:/mnt/a/b:ro"])
    assert mounts.index("/lustre:/fsx") < mounts.index("/data:/mnt/a") < mounts.index("/data/b:/mnt/a/b:ro")
    assert option(result.srun, "--container-workdir") is None, "/fsx/code is now /lustre's, not the host's /fsx"


def test_a_mount_that_covers_the_runtime_makes_its_own_mount_unneeded(tmp_path: Path) -> None:
    parent = str(Path(PACKAGE_PARENT).parent)
    result = launch(tmp_path, CPU, "--container-image", IMAGE, "--container-mounts", f"{parent}:{parent}", "--", "t")
    assert (option(result.srun, "--container-mounts") or "").split(",") == ["/fsx:/fsx", f"{parent}:{parent}"]


@pytest.mark.parametrize(
    ("argv", "cwd", "workdir"),
    [
        ([], "/fsx/code", "/fsx/code"),
        (["--container-mounts", "/home/ann/proj:/proj"], "/home/ann/proj/sub", "/proj/sub"),
        (["--container-workdir", "/workspace"], "/fsx/code", "/workspace"),
        ([], "/home/ann", None),
    ],
)
def test_the_working_directory_is_the_batch_scripts_as_the_container_sees_it(
    tmp_path: Path, argv: list[str], cwd: str, workdir: str | None
) -> None:
    result = launch(tmp_path, CPU, "--container-image", IMAGE, *argv, "--", "/fsx/t.py", cwd=cwd)
    assert option(result.srun, "--container-workdir") == workdir


def test_paths_the_container_cannot_see_are_pointed_out(tmp_path: Path) -> None:
    (tmp_path / "home/ann/ckpt").mkdir(parents=True)
    result = launch(
        tmp_path, CPU, "--container-image", IMAGE, "--", "train.py", "--checkpoint-dir=/home/ann/ckpt", "--data",
        "/fsx/data", cwd="/home/ann",
    )  # fmt: skip
    assert result.notes == (
        "the working directory /home/ann is not mounted in the container, so train.py is looked up in the image's "
        "WORKDIR; give an absolute path, --container-workdir or --container-mounts",
        "/home/ann/ckpt is on this node but not mounted in the container (unless the image has it too). Fix: "
        "--container-mounts /home/ann/ckpt:/home/ann/ckpt",
    )


def test_options_for_home_and_a_named_container_are_passed_on(tmp_path: Path) -> None:
    result = launch(
        tmp_path, CPU, "--container-image", IMAGE, "--container-mount-home", "--container-name", "ddp:auto", "--", "t"
    )
    assert "--container-mount-home" in result.srun and "--no-container-mount-home" not in result.srun
    assert option(result.srun, "--container-name") == "ddp:auto"


def test_the_on_node_stage_prepends_to_the_images_paths_and_drops_what_is_never_passed_on() -> None:
    args = parse(
        ["--on-node", "--in-container", f"--prepend-env=LD_LIBRARY_PATH={EFA_LIBRARY_PATH}",
         "--prepend-env=PYTHONPATH=/opt/hyperpod-cdk/lib", "--", "t.py"]
    )  # fmt: skip
    image = {"LD_LIBRARY_PATH": "/usr/local/cuda/lib64", "PYTHONPATH": "/opt/hyperpod-cdk/lib:/w", "NCCL_PROTO": "LL"}
    env = node_environment(args, image, ("NCCL_PROTO", "NCCL_ALGO"))
    assert env == {
        "LD_LIBRARY_PATH": EFA_LIBRARY_PATH + ":/usr/local/cuda/lib64",
        "PYTHONPATH": "/opt/hyperpod-cdk/lib:/w",
    }
    outside = parse(["--on-node", "--", "t.py"])
    assert node_environment(outside, image, ("NCCL_PROTO",)) == image, "outside a container the stage changes nothing"


SECRET = "s3cr3t-T0ken"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--container-mounts", "/fsx"],
            "--container-mounts: '/fsx' has no ':'; allowed: SRC:DST[:FLAGS], e.g. /fsx:/fsx",
        ),
        (["--container-mounts", "data:/data"], "source 'data' is not an absolute path"),
        (["--container-mounts", "/data:data"], "destination 'data' is not an absolute path"),
        (["--container-mounts", "/a:/b:RO"], "mount flags ['RO'] are not enroot mount options"),
        (["--container-mounts", "/a:/b,"], "an empty entry"),
        (["--container-mounts", "/a b:/b"], "contains white space"),
        (["--container-workdir", "work"], "--container-workdir: path 'work' is not an absolute path"),
        (["--container-name", "my run"], "--container-name: 'my run'; allowed: NAME[:FLAG]"),
        (["--container-name", "run:forever"], "FLAG one of auto, create, exec, no_exec"),
    ],
)
def test_bad_container_options_fail_with_a_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    root = root_with(tmp_path, CPU)
    code, _, err = dry_run(root, monkeypatch, capsys, "--container-image", IMAGE, *argv, "--", "t.py")
    assert code == 2
    assert message in err


@pytest.mark.parametrize(
    ("image", "message"),
    [
        ("./pytorch.sqsh", "'./pytorch.sqsh' is a relative path"),
        ("/fsx/images/missing.sqsh", "/fsx/images/missing.sqsh is not a file on this node"),
        ("nvcr.io/nvidia/pytorch:24.12-py3", "enroot separates the registry with '#'. Fix: nvcr.io#nvidia/pytorch"),
        ("docker://localhost:5000/train", "Fix: docker://localhost:5000#train"),
        (f"ann:{SECRET}@nvcr.io#nvidia/pytorch", "the image reference has credentials in it"),
    ],
)
def test_bad_images_fail_with_a_fix_and_never_echo_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], image: str, message: str
) -> None:
    root = root_with(tmp_path, CPU)
    code, out, err = dry_run(root, monkeypatch, capsys, "--container-image", image, "--", "t.py")
    assert code == 2
    assert message in err
    assert SECRET not in err + "\n".join(out)


@pytest.mark.parametrize(
    "image",
    [
        "ubuntu:24.04",
        "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
        "ann@nvcr.io#nvidia/pytorch:24.12-py3",
        "docker://public.ecr.aws#neuron/pytorch-training-neuronx:2.5.1",
        "rapidsai/devcontainers@sha256:24127712aa9025dc0cc4c784a74f7c20633a0751ce49b0122ca8d80210c65345",
        "ubuntu:24.04@sha256:24127712aa9025dc0cc4c784a74f7c20633a0751ce49b0122ca8d80210c65345",
    ],
)
def test_enroot_references_are_accepted(tmp_path: Path, image: str) -> None:
    assert launch(tmp_path, CPU, "--container-image", image, "--", "t.py").container_image == image


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    args = parse(["--container-image", "./x.sqsh", "--container-mounts", "/a,b:/b", "--container-workdir", "w"])
    with pytest.raises(ContainerError) as raised:
        container_from(args, tmp_path)
    assert [problem.split(":")[0] for problem in raised.value.problems] == [
        "--container-image",
        "--container-mounts",
        "--container-mounts",
        "--container-workdir",
    ]


def test_container_options_need_an_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = root_with(tmp_path, CPU)
    code, _, err = dry_run(
        root, monkeypatch, capsys, "--container-mounts", "/a:/a", "--container-mount-home", "--", "t"
    )
    assert code == 2
    assert "--container-mounts, --container-mount-home given without --container-image" in err


def test_the_on_node_entry_runs_in_an_image_that_has_its_own_paths(tmp_path: Path) -> None:
    """srun as pyxis would run the step: the ``--container-*`` options consumed, the image's PYTHONPATH and
    LD_LIBRARY_PATH in place of the job's, NCCL_PROTO set by the image. The entry finds the runtime without
    the job's PYTHONPATH, torchrun gets the rendezvous, and the training script can import the runtime."""
    root = root_with(tmp_path / "root", facts("ml.p4d.24xlarge", gpus=8))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "record"
    python3 = bin_dir / "python3"  # without site-packages: the image has no runtime of its own installed
    python3.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S "$@"\n')
    srun = bin_dir / "srun"
    srun.write_text(
        '#!/bin/sh\necho "srun $*" >> "$RECORD"\n'
        'while [ "${1#--}" != "$1" ]; do shift; done\n'
        "unset PYTHONPATH\n"
        'LD_LIBRARY_PATH=/usr/local/cuda/lib64 NCCL_PROTO=LL SLURM_STEP_NODELIST=worker-group-1-7 exec "$@"\n'
    )
    torchrun = bin_dir / "torchrun"
    torchrun.write_text(
        '#!/bin/sh\necho "torchrun $*" >> "$RECORD"\n'
        'echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH NCCL_PROTO=${NCCL_PROTO-unset} FI_PROVIDER=$FI_PROVIDER" >> "$RECORD"\n'
        'python3 -c "import training_runtime.checkpoint" && echo "imports the runtime" >> "$RECORD"\n'
    )
    for program in (srun, torchrun, python3):
        program.chmod(0o755)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k != "PYTHONPATH"},
        **JOB,
        "PATH": "{}:{}".format(bin_dir, os.environ["PATH"]),
        "RECORD": str(record),
    }
    result = subprocess.run(
        [sys.executable, "-m", "training_runtime", "launch", "--root", str(root), "--container-image", IMAGE,
         "--", "/fsx/train.py"],
        env={**env, "PYTHONPATH": str(SRC)}, capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    srun_line, torchrun_line, environment, imports = record.read_text().splitlines()
    assert f"--container-image={IMAGE} --container-mounts=/fsx:/fsx,{RUNTIME_MOUNT} " in srun_line
    assert torchrun_line == (
        "torchrun --nnodes=3 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=worker-group-1-7:29400 "
        "--rdzv-id=4242 --max-restarts=2 /fsx/train.py"
    )
    assert environment == f"LD_LIBRARY_PATH={EFA_LIBRARY_PATH}:/usr/local/cuda/lib64 NCCL_PROTO=unset FI_PROVIDER=efa"
    assert imports == "imports the runtime"


def example_launch(tmp_path: Path, *sbatch_args: str, **env: str) -> list[str]:
    """The example job run by bash with a stand-in python3 that records what it was asked to run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv"
    python3 = bin_dir / "python3"
    python3.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > "$RECORD"\n')
    python3.chmod(0o755)
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD": str(record), "SLURM_SUBMIT_DIR": "/fsx/jobs"}
    result = subprocess.run(
        ["bash", str(JOBS / "ddp_container.sbatch"), *sbatch_args],
        env={**base, **JOB, "SLURM_JOB_NAME": "ddp-container", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return record.read_text().splitlines()


def test_the_example_job_launches_the_ddp_example_in_a_container(tmp_path: Path) -> None:
    """The example's launch line is parsed by the launcher's own parser and builds a container launch: the
    example cannot drift from the options the launcher has."""
    argv = example_launch(tmp_path, "--steps", "20")
    assert argv[:3] == ["-m", "training_runtime", "launch"]
    args = parse(argv[3:])
    assert args.container_image == "/fsx/images/pytorch.sqsh"
    assert args.script == [
        "/fsx/jobs/ddp_train.py",
        "--checkpoint-dir",
        "/fsx/checkpoints/ddp-container",
        "--steps",
        "20",
    ]
    root = root_with(tmp_path / "root", CPU)
    (root / "fsx/images").mkdir(parents=True)
    (root / "fsx/images/pytorch.sqsh").write_bytes(b"hsqs")
    result = build(args, JOB, CPU, root, cwd="/fsx/jobs")
    assert option(result.srun, "--container-image") == "/fsx/images/pytorch.sqsh"
    assert result.notes == ()
    assert (JOBS / "ddp_train.py").is_file()


def test_the_example_job_passes_extra_mounts_and_another_image(tmp_path: Path) -> None:
    argv = example_launch(tmp_path, IMAGE="docker://pytorch/pytorch:2.5.1", CONTAINER_MOUNTS="/data:/data:ro")
    args = parse(argv[3:])
    assert (args.container_image, args.container_mounts) == ("docker://pytorch/pytorch:2.5.1", "/data:/data:ro")
    assert shlex.join(args.script).startswith("/fsx/jobs/ddp_train.py --checkpoint-dir")
