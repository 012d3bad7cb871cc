"""The training launcher: ``launch --dry-run`` per platform and instance family, and a real exec chain."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from training_runtime.facts import NodeFacts
from training_runtime.launch import FAMILIES, NEURON_EFA, NVIDIA_EFA, RDZV_PORT, main, on_node, parse
from training_runtime.launch_checkpoint import LOCAL_VARIABLE, MODE_VARIABLE
from training_runtime.paths import FACTS_PATH

SRC = Path(__file__).resolve().parent.parent / "src"

JOB = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "worker-group-1-[3-4,7]",
    "SLURM_JOB_NUM_NODES": "3",
    "SLURM_CPUS_ON_NODE": "16",
}


def facts(instance_type: str, platform: str = "generic", **counts: int) -> NodeFacts:
    return NodeFacts(
        cluster="demo",
        instance_name="worker-group-1-3",
        instance_type=instance_type,
        group="worker-group-1",
        role="compute",
        platform=platform,
        shared_mount="/fsx",
        cpus=counts.pop("cpus", 16),
        **counts,
    )


def root_with(tmp_path: Path, node: NodeFacts) -> Path:
    path = tmp_path / FACTS_PATH.lstrip("/")
    path.parent.mkdir(parents=True)
    path.write_text(node.dumps())
    return tmp_path


def dry_run(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str, **env: str
) -> tuple[int, list[str], str]:
    for name in [
        *JOB,
        "SLURM_STEP_NODELIST",
        "SLURM_GPUS_ON_NODE",
        "NCCL_PROTO",
        "NCCL_ALGO",
        "NCCL_SOCKET_IFNAME",
        MODE_VARIABLE,
        LOCAL_VARIABLE,
    ]:
        monkeypatch.delenv(name, raising=False)
    for name, value in {**JOB, **env}.items():
        monkeypatch.setenv(name, value)
    code = main(["--dry-run", "--root", str(root), "--torchrun", "/envs/pt/bin/torchrun", *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def exports(lines: list[str]) -> dict[str, str]:
    pairs = [shlex.split(line[len("export ") :])[0].split("=", 1) for line in lines if line.startswith("export ")]
    return dict(pairs)


def command(lines: list[str], program: str) -> list[str]:
    found = [shlex.split(line) for line in lines if line.split(" ", 1)[0].endswith(program)]
    assert len(found) == 1, lines
    return found[0]


FAMILY_CASES = [
    ("ml.p4d.24xlarge", "p4d", NVIDIA_EFA, 8),
    ("ml.p4de.24xlarge", "p4d", NVIDIA_EFA, 8),
    ("ml.p5.48xlarge", "p5", NVIDIA_EFA, 8),
    ("ml.p5en.48xlarge", "p5", NVIDIA_EFA, 8),
    ("ml.trn1.32xlarge", "trn1", NEURON_EFA, 32),
    ("ml.trn1n.32xlarge", "trn1", NEURON_EFA, 32),
    ("ml.trn2.48xlarge", "trn2", NEURON_EFA, 64),
    ("ml.c5.4xlarge", "other", {}, 16),
]


def test_every_family_in_the_table_has_a_case() -> None:
    assert {f.name for f in FAMILIES} | {"other"} == {case[1] for case in FAMILY_CASES}


@pytest.mark.parametrize(("instance_type", "family", "environment", "nproc"), FAMILY_CASES)
def test_dry_run_sets_the_family_environment_and_processes_per_node(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    instance_type: str,
    family: str,
    environment: dict[str, str],
    nproc: int,
) -> None:
    code, lines, _ = dry_run(tmp_path, monkeypatch, capsys, "--instance-type", instance_type, "--", "train.py")
    assert code == 0
    assert lines[0].startswith(f"# hyperpod-cdk launch: family {family}, platform generic")
    exported = exports(lines)
    exported.pop("PYTHONPATH", None)
    assert exported == {name: value for name, value in environment.items()}
    torchrun = command(lines, "torchrun")
    assert f"--nproc-per-node={nproc}" in torchrun
    assert not any(name in " ".join(lines) for name in ("NCCL_PROTO", "NCCL_ALGO"))


def test_sync_checkpoints_turns_asynchronous_checkpoints_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = root_with(tmp_path, facts("ml.p5.48xlarge", gpus=8, efa_interfaces=32))
    _, lines, _ = dry_run(root, monkeypatch, capsys, "--sync-checkpoints", "--", "train.py")
    assert exports(lines)[MODE_VARIABLE] == "sync" and LOCAL_VARIABLE not in exports(lines)
    assert "--sync-checkpoints" not in " ".join(command(lines, "torchrun"))  # the script's arguments are its own
    _, lines, _ = dry_run(root, monkeypatch, capsys, "--", "train.py", **{MODE_VARIABLE: "sync"})
    assert exports(lines)[MODE_VARIABLE] == "sync"
    code, _, err = dry_run(root, monkeypatch, capsys, "--", "train.py", **{MODE_VARIABLE: "yes"})
    assert code == 2 and "HYPERPOD_CDK_CHECKPOINT='yes': allowed: async, sync" in err


def test_neuron_compile_cache_goes_on_shared_storage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = root_with(tmp_path, facts("ml.trn1.32xlarge", neuron_devices=16, neuron_cores=32, efa_interfaces=8))
    _, lines, _ = dry_run(root, monkeypatch, capsys, "--", "train.py")
    assert exports(lines)["NEURON_COMPILE_CACHE_URL"] == "/fsx/.hyperpod-cdk/neuron-cache"
    assert "--nproc-per-node=32" in command(lines, "torchrun")


def test_generic_node_relies_on_requeue_and_restarts_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = root_with(tmp_path, facts("ml.p5.48xlarge", gpus=8, efa_interfaces=32))
    _, lines, _ = dry_run(root, monkeypatch, capsys, "--", "train.py", "--lr", "3e-4")
    srun = command(lines, "srun")
    assert not any(part.startswith("--auto-resume") for part in srun)
    assert srun[1:7] == [
        "--nodes=3",
        "--ntasks=3",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        "--cpus-per-task=16",
    ]
    assert srun[srun.index("--") + 1 :] == ["train.py", "--lr", "3e-4"]
    assert command(lines, "torchrun") == [
        "/envs/pt/bin/torchrun",
        "--nnodes=3",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=worker-group-1-3:{RDZV_PORT}",
        "--rdzv-id=4242",
        "--max-restarts=2",
        "train.py",
        "--lr",
        "3e-4",
    ]


def test_hyperpod_node_adds_auto_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = root_with(tmp_path, facts("ml.p5.48xlarge", platform="hyperpod", gpus=8, efa_interfaces=32))
    _, lines, _ = dry_run(root, monkeypatch, capsys, "--", "train.py")
    assert "platform hyperpod" in lines[0]
    srun = command(lines, "srun")
    assert srun[1] == "--auto-resume=1"
    assert "--max-restarts=0" in srun
    assert "--max-restarts=0" in command(lines, "torchrun")


def test_hyperpod_is_detected_from_its_marker_without_node_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    _, lines, _ = dry_run(tmp_path, monkeypatch, capsys, "--instance-type", "ml.p4d.24xlarge", "--", "t.py")
    assert command(lines, "srun")[1] == "--auto-resume=1"


def test_the_marker_at_launch_time_wins_over_generic_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # HyperPod's srun option exists wherever its marker is (the emulated platform may add it after bootstrap).
    root = root_with(tmp_path, facts("ml.p5.48xlarge", gpus=8, efa_interfaces=32))
    (root / "opt/sagemaker_cluster").mkdir(parents=True)
    _, lines, _ = dry_run(root, monkeypatch, capsys, "--", "train.py")
    srun = command(lines, "srun")
    assert srun[1] == "--auto-resume=1"
    assert "--max-restarts=0" in command(lines, "torchrun")


def test_allocated_gpus_override_the_instance_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = root_with(tmp_path, facts("ml.p5.48xlarge", gpus=8))
    _, lines, _ = dry_run(root, monkeypatch, capsys, "--", "t.py", SLURM_GPUS_ON_NODE="4")
    assert "--nproc-per-node=4" in command(lines, "torchrun")
    _, lines, _ = dry_run(root, monkeypatch, capsys, "--nproc-per-node", "2", "--", "t.py")
    assert "--nproc-per-node=2" in command(lines, "torchrun")


def test_cpu_nodes_start_one_process_per_allocated_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = root_with(tmp_path, facts("ml.c5.4xlarge", cpus=16))
    _, lines, _ = dry_run(root, monkeypatch, capsys, "--", "t.py", SLURM_CPUS_ON_NODE="2")
    assert "--nproc-per-node=2" in command(lines, "torchrun")
    assert "--cpus-per-task=2" in command(lines, "srun")
    assert {k for k in exports(lines) if k != "PYTHONPATH"} == set()


def test_nccl_protocol_and_algorithm_are_never_passed_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = root_with(tmp_path, facts("ml.p4d.24xlarge", gpus=8))
    _, lines, _ = dry_run(root, monkeypatch, capsys, "--", "t.py", NCCL_PROTO="simple", NCCL_ALGO="Ring")
    assert [line.split()[:2] for line in lines if line.startswith("unset")] == [
        ["unset", "NCCL_PROTO"],
        ["unset", "NCCL_ALGO"],
    ]
    assert "NCCL_PROTO" not in exports(lines) and "NCCL_ALGO" not in exports(lines)


def test_the_jobs_own_values_win_and_library_paths_are_prepended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = root_with(tmp_path, facts("ml.p5.48xlarge", gpus=8))
    _, lines, _ = dry_run(
        root, monkeypatch, capsys, "--", "t.py", NCCL_SOCKET_IFNAME="^lo,docker0", LD_LIBRARY_PATH="/usr/local/cuda/lib"
    )
    exported = exports(lines)
    assert "NCCL_SOCKET_IFNAME" not in exported
    assert exported["LD_LIBRARY_PATH"] == NVIDIA_EFA["LD_LIBRARY_PATH"] + ":/usr/local/cuda/lib"


def test_rendezvous_follows_the_steps_node_list_on_each_node() -> None:
    """A retried step on a replaced first node rendezvouses on the new first node, by host name."""
    args = parse(["--on-node", "--nproc-per-node=8", "--max-restarts=0", "--torchrun=/t/torchrun", "--", "x.py"])
    env = {
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NODELIST": "ip-10-1-0-[11-12]",
        "SLURM_STEP_NODELIST": "ip-10-1-0-[12,19]",
        "SLURM_STEP_NUM_NODES": "2",
    }
    assert on_node(args, env) == [
        "/t/torchrun",
        "--nnodes=2",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=ip-10-1-0-12:{RDZV_PORT}",
        "--rdzv-id=7",
        "--max-restarts=0",
        "x.py",
    ]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--", "t.py"], {"SLURM_JOB_ID": ""}, "SLURM_JOB_ID is not set"),
        ([], {}, "no training script"),
        (["--instance-type", "ml.x9.huge", "--", "t.py"], {}, "'ml.x9.huge' is not in the hardware table"),
        (["--nproc-per-node", "0", "--", "t.py"], {}, "--nproc-per-node: got 0; allowed: 1 or more"),
    ],
)
def test_bad_launches_fail_with_a_fix(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    root = root_with(tmp_path, facts("ml.c5.4xlarge"))
    code, _, err = dry_run(root, monkeypatch, capsys, *args, **env)
    assert code == 2
    assert message in err


def test_without_node_facts_the_error_says_how_to_fix_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = dry_run(tmp_path, monkeypatch, capsys, "--", "t.py")
    assert code == 2
    assert FACTS_PATH in err and "--instance-type" in err


def test_launch_execs_srun_which_execs_torchrun_on_each_node(tmp_path: Path) -> None:
    """The real chain with stand-ins: ``srun`` runs its command once as one node; ``torchrun`` records."""
    root = root_with(tmp_path / "root", facts("ml.p4d.24xlarge", gpus=8))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "record"
    srun = bin_dir / "srun"
    srun.write_text(
        '#!/bin/sh\necho "srun $*" >> "$RECORD"\n'
        'while [ "${1#--}" != "$1" ]; do shift; done\n'
        'SLURM_STEP_NODELIST=worker-group-1-4,worker-group-1-7 exec "$@"\n'
    )
    torchrun = bin_dir / "torchrun"
    torchrun.write_text(
        '#!/bin/sh\necho "torchrun $* FI_PROVIDER=$FI_PROVIDER NCCL_PROTO=${NCCL_PROTO-unset}" >> "$RECORD"\n'
    )
    for program in (srun, torchrun):
        program.chmod(0o755)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SLURM_")},
        **JOB,
        "PATH": "{}:{}".format(bin_dir, os.environ["PATH"]),
        "PYTHONPATH": str(SRC),
        "RECORD": str(record),
        "NCCL_PROTO": "simple",
    }
    result = subprocess.run(
        [sys.executable, "-m", "training_runtime", "launch", "--root", str(root), "--", "train.py", "--epochs", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    srun_line, torchrun_line = record.read_text().splitlines()
    assert srun_line.startswith("srun --nodes=3 --ntasks=3 --ntasks-per-node=1")
    assert torchrun_line == (
        f"torchrun --nnodes=3 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=worker-group-1-4:{RDZV_PORT} "
        "--rdzv-id=4242 --max-restarts=2 train.py --epochs 2 FI_PROVIDER=efa NCCL_PROTO=unset"
    )


def test_emulated_hardware_runs_cpu_processes_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trn1 node of the local cluster: the family's environment as on a trn1, marked emulated, one process
    per allocated CPU (its NeuronCores are declared, not present)."""
    trn1 = facts("ml.trn1.32xlarge", neuron_devices=16, neuron_cores=32, efa_interfaces=8, emulated_hardware=True)
    code, lines, _ = dry_run(root_with(tmp_path, trn1), monkeypatch, capsys, "--", "train.py")
    assert code == 0
    assert lines[0].startswith("# hyperpod-cdk launch: family trn1 (emulated hardware), platform generic")
    exported = exports(lines)
    assert exported["HYPERPOD_CDK_EMULATED_HARDWARE"] == "1"
    assert exported["FI_PROVIDER"] == NEURON_EFA["FI_PROVIDER"]
    assert "--nproc-per-node=16" in command(lines, "torchrun"), "SLURM_CPUS_ON_NODE, not 32 NeuronCores"
