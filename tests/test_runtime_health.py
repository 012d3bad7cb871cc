"""Node health checks: each check against a fake root and recorded commands, what a failure does to the
node in Slurm (generic drain, HyperPod reboot/replace), the options, the step and the slurm.conf wiring."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from runtime_fakes import RecordingRunner, fake_node, touch
from training_runtime import health
from training_runtime.facts import NodeFacts
from training_runtime.health import (
    FAILED,
    OK,
    RECOVERY_FILE,
    SKIPPED,
    CheckResult,
    Context,
    NodeState,
    check_and_act,
    check_dcgm,
    check_disk,
    check_efa,
    check_gpu,
    check_neuron,
    check_shared_storage,
    efa_domains,
    load_health_options,
    neuron_device_count,
    parse_node_state,
    plan_actions,
    run_checks,
    situation,
)
from training_runtime.options import HealthOptions, options_problems, parse_options
from training_runtime.paths import BIN_DIR, DONE_MARKER
from training_runtime.run import CommandError, Result, Runner
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.health import (
    HEALTH_CHECK,
    PROLOG_PROGRAM,
    SERVICE,
    TIMER,
    HealthPrograms,
    HealthTimerRemoved,
    health_program,
)
from training_runtime.steps.slurm import rendered_files

SRC = Path(__file__).resolve().parents[1] / "src"
GIB = 1024**3


def p5_facts(**changes: Any) -> NodeFacts:
    base = NodeFacts(
        cluster="test",
        instance_name="workers-1",
        instance_type="ml.p5.48xlarge",
        group="workers",
        role="compute",
        platform="generic",
        shared_mount="/fsx",
        cpus=96,
        gpus=8,
        efa_interfaces=32,
    )
    return replace(base, **changes)


def cpu_facts(**changes: Any) -> NodeFacts:
    return p5_facts(**{"instance_type": "ml.c5.xlarge", "cpus": 4, "gpus": 0, "efa_interfaces": 0, **changes})


class Fs(NamedTuple):
    f_blocks: int
    f_frsize: int
    f_bavail: int
    f_fsid: int


def disks(sizes: Mapping[str, tuple[float, float, int]]) -> Any:
    """A statvfs for a fake root: absolute path -> (size GiB, free GiB, fsid); '/' for anything else."""

    def statvfs(host_path: str) -> Fs:
        for path, (size, free, fsid) in sizes.items():
            if path != "/" and host_path.endswith(path):
                return Fs(int(size * 1024), 1024 * 1024, int(free * 1024), fsid)
        size, free, fsid = sizes["/"]
        return Fs(int(size * 1024), 1024 * 1024, int(free * 1024), fsid)

    return statvfs


ROOMY = disks({"/": (200, 100, 1)})


def context(
    root: Path,
    facts: NodeFacts | None = None,
    *,
    runner: Runner | None = None,
    mode: str = health.PERIODIC,
    options: HealthOptions | None = None,
    statvfs: Any = ROOMY,
    clock: Any = time.time,
) -> Context:
    root.mkdir(parents=True, exist_ok=True)
    facts = facts or p5_facts()
    return Context(
        facts=facts,
        options=options or HealthOptions(),
        mode=mode,
        root=root,
        runner=runner or RecordingRunner(),
        node_name=facts.instance_name if facts.platform == "generic" else "ip-10-1-0-11",
        statvfs=statvfs,
        clock=clock,
    )


def executable(root: Path, path: str) -> str:
    touch(root, path, "#!/bin/sh\n").chmod(0o755)
    return path


class TimingOut(RecordingRunner):
    """Every command whose argv starts with one of ``hanging`` runs past its timeout."""

    def __init__(self, *hanging: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hanging = hanging

    def run(self, argv: Sequence[str], **kwargs: Any) -> Result:
        if any(str(argv[0]).endswith(h) for h in self.hanging):
            self.commands.append(list(argv))
            raise CommandError(argv, None, "")
        return super().run(argv, **kwargs)


def lines(count: int) -> str:
    return "".join(f"{i}\n" for i in range(count))


# --- gpu ------------------------------------------------------------------------------------------------


def test_gpu_is_skipped_where_none_are_expected(tmp_path: Path) -> None:
    runner = RecordingRunner()
    result = check_gpu(context(tmp_path, cpu_facts(), runner=runner))
    assert (result.status, result.detail) == (SKIPPED, "no GPUs expected on ml.c5.xlarge")
    assert runner.commands == []


def test_gpu_passes_when_nvidia_smi_lists_every_gpu(tmp_path: Path) -> None:
    smi = executable(tmp_path, "/usr/bin/nvidia-smi")
    runner = RecordingRunner({(smi,): (0, lines(8))})
    assert check_gpu(context(tmp_path, runner=runner)) == CheckResult("gpu", OK, "8 GPUs")
    assert runner.commands == [[smi, "--query-gpu=index", "--format=csv,noheader"]]


def test_gpu_fails_on_a_missing_gpu_or_a_missing_tool(tmp_path: Path) -> None:
    assert check_gpu(context(tmp_path / "none")) == CheckResult("gpu", FAILED, "nvidia-smi not found; 8 GPUs expected")
    smi = executable(tmp_path, "/usr/bin/nvidia-smi")
    seven = check_gpu(context(tmp_path, runner=RecordingRunner({(smi,): (0, lines(7))})))
    assert (seven.status, seven.detail) == (FAILED, "nvidia-smi lists 7 of 8 GPUs")
    broken = check_gpu(context(tmp_path, runner=RecordingRunner({(smi,): (6, "No devices were found\n")})))
    assert (broken.status, broken.detail) == (FAILED, "nvidia-smi exited 6: No devices were found")
    hung = check_gpu(context(tmp_path, runner=TimingOut("nvidia-smi")))
    assert (hung.status, hung.detail) == (FAILED, "nvidia-smi did not answer within 15 s")


# --- dcgm -----------------------------------------------------------------------------------------------

DCGM_FAIL = """+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
| Deployment                | Fail                                           |
| Warning                   | GPU 3: page retirement pending                  |
+---------------------------+------------------------------------------------+
"""


def test_dcgm_runs_level_1_in_the_prolog(tmp_path: Path) -> None:
    dcgmi = executable(tmp_path, "/usr/bin/dcgmi")
    runner = RecordingRunner()
    result = check_dcgm(context(tmp_path, runner=runner, mode=health.PROLOG))
    assert (result.status, runner.commands) == (OK, [[dcgmi, "diag", "-r", "1"]])
    failing = RecordingRunner({(dcgmi,): (226, DCGM_FAIL)})
    result = check_dcgm(context(tmp_path, runner=failing, mode=health.PROLOG))
    assert (result.status, result.detail) == (FAILED, "dcgmi diag -r 1: Deployment                | Fail")


def test_dcgm_is_skipped_without_gpus_when_off_periodically_and_fails_open(tmp_path: Path) -> None:
    def status(ctx: Context) -> tuple[str, str]:
        result = check_dcgm(ctx)
        return result.status, result.detail

    assert status(context(tmp_path, cpu_facts(), mode=health.PROLOG)) == (SKIPPED, "no GPUs expected on ml.c5.xlarge")
    off = HealthOptions(dcgm_level=0)
    assert status(context(tmp_path, mode=health.PROLOG, options=off)) == (
        SKIPPED,
        "turned off (health.dcgm_level: 0)",
    )
    assert status(context(tmp_path)) == (SKIPPED, "runs in the prolog only; the GPUs may be in use now")
    assert status(context(tmp_path, mode=health.PROLOG)) == (SKIPPED, "dcgmi not installed (fails open)")
    dcgmi = executable(tmp_path, "/usr/bin/dcgmi")
    no_engine = RecordingRunner({(dcgmi,): (255, "Error: unable to establish a connection to the specified host\n")})
    result = check_dcgm(context(tmp_path, runner=no_engine, mode=health.PROLOG))
    assert result.status == SKIPPED and result.detail.startswith("DCGM host engine not answering (fails open)")


# --- neuron ---------------------------------------------------------------------------------------------

TRN1 = {"instance_type": "ml.trn1.32xlarge", "gpus": 0, "neuron_devices": 16, "efa_interfaces": 8}


def neuron_ls_json(devices: int) -> str:
    return json.dumps(
        [{"neuron_device": i, "bdf": "10:1c.0", "nc_count": 2, "neuron_processes": []} for i in range(devices)]
    )


def test_neuron_counts_devices_from_neuron_ls(tmp_path: Path) -> None:
    tool = executable(tmp_path, "/opt/aws/neuron/bin/neuron-ls")
    runner = RecordingRunner({(tool,): (0, neuron_ls_json(16))})
    result = check_neuron(context(tmp_path, p5_facts(**TRN1), runner=runner))
    assert (result.status, result.detail, runner.commands) == (OK, "16 Neuron devices", [[tool, "--json-output"]])
    short = RecordingRunner({(tool,): (0, neuron_ls_json(15))})
    result = check_neuron(context(tmp_path, p5_facts(**TRN1), runner=short))
    assert (result.status, result.detail) == (FAILED, "neuron-ls shows 15 of 16 Neuron devices")


def test_neuron_understands_the_newer_json_flag_and_falls_back_to_dev(tmp_path: Path) -> None:
    tool = executable(tmp_path, "/opt/aws/neuron/bin/neuron-ls")
    newer = RecordingRunner(
        {
            (tool, "--json-output"): (2, "error: unexpected argument '--json-output'\n"),
            (tool, "--output-format"): (0, json.dumps({"instance": {}, "neuron_devices": [{}] * 16})),
        }
    )
    assert check_neuron(context(tmp_path, p5_facts(**TRN1), runner=newer)).status == OK
    assert newer.commands[1] == [tool, "--output-format", "json"]
    for i in range(16):
        touch(tmp_path, f"/dev/neuron{i}")
    unknown = RecordingRunner({(tool,): (0, "not json")})
    result = check_neuron(context(tmp_path, p5_facts(**TRN1), runner=unknown))
    assert (result.status, result.detail) == (OK, "16 Neuron devices")
    assert neuron_device_count({"something": "else"}) is None


def test_neuron_is_skipped_without_devices_and_fails_without_the_tool(tmp_path: Path) -> None:
    assert check_neuron(context(tmp_path)).status == SKIPPED
    result = check_neuron(context(tmp_path, p5_facts(**TRN1)))
    assert (result.status, result.detail) == (FAILED, "neuron-ls not found; 16 Neuron devices expected")


# --- efa ------------------------------------------------------------------------------------------------


def fi_info(domains: int) -> str:
    block = "provider: efa\n    fabric: efa\n    domain: rdmap{0}s0-rdm\n    version: 122.0\n    type: FI_EP_RDM\n"
    return "".join(block.format(i) for i in range(domains))


def test_efa_counts_distinct_efa_domains(tmp_path: Path) -> None:
    tool = executable(tmp_path, "/opt/amazon/efa/bin/fi_info")
    runner = RecordingRunner({(tool,): (0, fi_info(32))})
    assert check_efa(context(tmp_path, runner=runner)) == CheckResult("efa", OK, "32 EFA devices")
    assert runner.commands == [[tool, "-p", "efa", "-t", "FI_EP_RDM"]]
    short = check_efa(context(tmp_path, runner=RecordingRunner({(tool,): (0, fi_info(31))})))
    assert (short.status, short.detail) == (FAILED, "fi_info lists 31 of 32 EFA devices")
    none = check_efa(context(tmp_path, runner=RecordingRunner({(tool,): (195, "fi_getinfo: -61\n")})))
    assert (none.status, none.detail) == (FAILED, "fi_info -p efa exited 195: fi_getinfo: -61")
    assert efa_domains(fi_info(2) + fi_info(2) + "provider: shm\n    domain: shm\n") == ["rdmap0s0-rdm", "rdmap1s0-rdm"]


def test_efa_is_skipped_where_none_are_expected_and_fails_without_fi_info(tmp_path: Path) -> None:
    assert check_efa(context(tmp_path, cpu_facts())).status == SKIPPED
    assert check_efa(context(tmp_path)).detail == "fi_info not found; 32 EFA interfaces expected"


# --- shared storage -------------------------------------------------------------------------------------

MOUNTINFO = "25 1 259:1 / / rw,relatime - ext4 /dev/root rw\n{}"
FSX_MOUNT = "98 25 0:52 / /fsx rw,relatime - lustre 10.1.0.7@tcp:/abcdefgh rw,flock\n"


def test_shared_storage_takes_a_real_write_and_leaves_nothing_behind(tmp_path: Path) -> None:
    (tmp_path / "fsx").mkdir()
    result = check_shared_storage(context(tmp_path, cpu_facts(), runner=Runner()))
    assert (result.status, result.detail) == (OK, "/fsx writable")
    assert list((tmp_path / "fsx/.hyperpod-cdk/health").iterdir()) == []


def test_shared_storage_must_be_mounted_on_hyperpod_and_when_fstab_lists_it(tmp_path: Path) -> None:
    (tmp_path / "fsx").mkdir()
    hyperpod = cpu_facts(platform="hyperpod")
    touch(tmp_path, "/proc/self/mountinfo", MOUNTINFO.format(""))
    result = check_shared_storage(context(tmp_path, hyperpod, runner=Runner()))
    assert (result.status, result.detail) == (FAILED, "/fsx is not mounted")
    generic = context(tmp_path, cpu_facts(), runner=Runner())
    assert check_shared_storage(generic).status == OK  # no file system configured: a directory will do
    touch(tmp_path, "/etc/fstab", "fs-0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh /fsx lustre defaults 0 0\n")
    assert check_shared_storage(generic).detail == "/fsx is not mounted"
    touch(tmp_path, "/proc/self/mountinfo", MOUNTINFO.format(FSX_MOUNT))
    assert check_shared_storage(context(tmp_path, hyperpod, runner=Runner())).detail == "/fsx mounted and writable"


def test_shared_storage_fails_when_the_write_fails_or_hangs(tmp_path: Path) -> None:
    touch(tmp_path, "/fsx/.hyperpod-cdk", "a file where the directory should be")
    result = check_shared_storage(context(tmp_path, cpu_facts(), runner=Runner()))
    assert result.status == FAILED and result.detail.startswith("cannot write to /fsx: ")
    hung = check_shared_storage(context(tmp_path, cpu_facts(), runner=TimingOut(os.path.basename(sys.executable))))
    assert (hung.status, hung.detail) == (FAILED, "a write to /fsx did not answer within 10 s")
    assert check_shared_storage(context(tmp_path / "x", cpu_facts())).detail == "/fsx does not exist"


def test_shared_storage_is_skipped_without_a_file_system(tmp_path: Path) -> None:
    result = check_shared_storage(context(tmp_path, cpu_facts(shared_mount=None)))
    assert (result.status, result.detail) == (SKIPPED, "no shared file system configured")


# --- disk -----------------------------------------------------------------------------------------------


def test_disk_needs_10_gib_or_5_percent_whichever_is_smaller(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir()
    (tmp_path / "var/spool/slurmd").mkdir(parents=True)

    def disk(sizes: Mapping[str, tuple[float, float, int]]) -> CheckResult:
        return check_disk(context(tmp_path, cpu_facts(), statvfs=disks(sizes)))

    assert disk({"/": (200, 11, 1)}) == CheckResult("disk", OK, "/ 11 GiB free")  # one file system
    assert disk({"/": (200, 9, 1)}).detail == "/ has 9.0 GiB free of 200.0 GiB, needs 10.0"
    assert disk({"/": (20, 1.5, 1)}).status == OK  # a 20 GiB disk needs 1 GiB
    tmp_full = disk({"/": (200, 50, 1), "/tmp": (8, 0.2, 2)})
    assert (tmp_full.status, tmp_full.detail) == (FAILED, "/tmp has 0.2 GiB free of 8.0 GiB, needs 0.4")
    spool = disk({"/": (200, 50, 1), "/tmp": (8, 4, 2), "/var/spool/slurmd": (100, 2, 3)})
    assert spool.detail == "/var/spool/slurmd has 2.0 GiB free of 100.0 GiB, needs 5.0"
    off = check_disk(context(tmp_path, options=HealthOptions(min_free_disk_gib=0), statvfs=disks({"/": (9, 0, 1)})))
    assert (off.status, off.detail) == (SKIPPED, "turned off (health.min_free_disk_gib: 0)")


# --- all checks together --------------------------------------------------------------------------------


def test_a_check_that_hangs_fails_at_the_deadline_and_the_rest_still_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, finished = threading.Event(), threading.Event()

    def hangs(ctx: Context) -> CheckResult:
        release.wait(60)  # held until the assertions below are done
        finished.set()
        return CheckResult("gpu", OK)

    def crashes(ctx: Context) -> CheckResult:
        raise KeyError("bug")

    checks = dict(health.CHECKS)
    checks.update({"gpu": hangs, "efa": crashes})
    monkeypatch.setattr(health.checks, "CHECKS", tuple(checks.items()))
    try:
        results = {r.name: r for r in run_checks(context(tmp_path, cpu_facts(shared_mount=None)), deadline_s=0.3)}
        assert not finished.is_set(), "run_checks waited for the hung check instead of giving up at the deadline"
        assert results["gpu"] == CheckResult("gpu", FAILED, "no result within 0 s")
        assert results["efa"] == CheckResult("efa", FAILED, "check crashed: KeyError: 'bug'")
        assert results["disk"].status == OK and list(results) == list(health.CHECK_NAMES)
    finally:
        release.set()


# --- what a failure does in Slurm -----------------------------------------------------------------------

SHOW_NODE = """NodeName=workers-1 Arch=x86_64 CoresPerSocket=4
   CPUAlloc=0 CPUEfctv=4 CPUTot=4 CPULoad=0.01
   NodeAddr=10.1.0.11 NodeHostName=workers-1 Version=22.05.8
   State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=dev
   BootTime=2026-01-01T00:00:00 SlurmdStartTime=2026-01-01T00:00:10
{extra}"""


def show(state: str = "IDLE", reason: str = "", comment: str = "") -> str:
    extra = ""
    if reason:
        extra += f"   Reason={reason} [root@2026-01-01T00:01:00]\n"
    if comment:
        extra += f"   Comment={comment}\n"
    return SHOW_NODE.format(state=state, extra=extra)


def test_scontrol_show_node_is_parsed() -> None:
    state = parse_node_state(show("IDLE+DRAIN", "hyperpod-cdk:disk: / has 3.0 GiB free", "x y"))
    assert state == NodeState("IDLE+DRAIN", "hyperpod-cdk:disk: / has 3.0 GiB free", "x y")
    assert state.drained and state.ours and not state.failing
    assert parse_node_state(show("MIXED")) == NodeState("MIXED")
    assert parse_node_state(show("IDLE+FAIL", "Action:Reboot")).failing  # type: ignore[union-attr]
    assert parse_node_state("slurm_load_node error: Invalid node name specified") is None


GPU_DOWN = CheckResult("gpu", FAILED, "nvidia-smi lists 7 of 8 GPUs")
DISK_FULL = CheckResult("disk", FAILED, "/ has 3.0 GiB free of 200.0 GiB, needs 10.0")
DCGM_FAILED = CheckResult("dcgm", FAILED, "dcgmi diag -r 1: Deployment | Fail")
HEALTHY = [CheckResult(name, OK) for name in health.CHECK_NAMES]


def test_generic_platform_drains_with_a_reason_naming_the_check(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    assert plan_actions(situation(ctx), [GPU_DOWN], NodeState("IDLE")) == [
        [
            "scontrol",
            "update",
            "nodename=workers-1",
            "state=drain",
            "reason=hyperpod-cdk:gpu: nvidia-smi lists 7 of 8 GPUs",
        ]
    ]
    assert plan_actions(situation(ctx), [DISK_FULL, GPU_DOWN], NodeState("ALLOCATED")) == [
        [
            "scontrol",
            "update",
            "nodename=workers-1",
            "state=drain",
            "reason=hyperpod-cdk:gpu: nvidia-smi lists 7 of 8 GPUs (also disk)",
        ]
    ]


def test_drains_are_idempotent_and_never_override_someone_elses(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    ours = NodeState("IDLE+DRAIN", "hyperpod-cdk:gpu: nvidia-smi lists 6 of 8 GPUs")
    assert plan_actions(situation(ctx), [GPU_DOWN], ours) == []
    theirs = NodeState("IDLE+DRAIN", "bad DIMM, ticket 1234")
    assert plan_actions(situation(ctx), [GPU_DOWN], theirs) == []
    assert plan_actions(situation(ctx), HEALTHY, theirs) == []
    other_check = NodeState("IDLE+DRAIN", "hyperpod-cdk:disk: / has 3.0 GiB free")
    assert plan_actions(situation(ctx), [GPU_DOWN], other_check)[0][-1].startswith("reason=hyperpod-cdk:gpu:")


def test_our_own_drain_is_resumed_when_the_checks_pass_again(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    drained = NodeState("IDLE+DRAIN", "hyperpod-cdk:disk: / has 3.0 GiB free")
    assert plan_actions(situation(ctx), HEALTHY, drained) == [
        ["scontrol", "update", "nodename=workers-1", "state=resume"]
    ]
    assert plan_actions(situation(ctx), HEALTHY, NodeState("IDLE")) == []
    prolog = context(tmp_path, mode=health.PROLOG)
    assert plan_actions(situation(prolog), HEALTHY, drained) == []


def test_hyperpod_reboots_then_replaces_for_hardware_faults(tmp_path: Path) -> None:
    now = [1_000_000.0]
    smi = executable(tmp_path, "/usr/bin/nvidia-smi")
    runner = RecordingRunner({("/opt/slurm/bin/scontrol", "show"): (0, show("IDLE")), (smi,): (0, lines(7))})
    ctx = context(tmp_path, p5_facts(platform="hyperpod", shared_mount=None), runner=runner, clock=lambda: now[0])
    touch(tmp_path, DONE_MARKER, "{}")
    results, status = check_and_act(ctx)
    assert status == 0 and [r.name for r in results if r.failed] == ["gpu", "efa"]
    node = "nodename=ip-10-1-0-11"
    assert runner.ran("/opt/slurm/bin/scontrol", "update") == [
        [
            "/opt/slurm/bin/scontrol",
            "update",
            node,
            "comment=hyperpod-cdk:gpu: nvidia-smi lists 7 of 8 GPUs (also efa)",
        ],
        ["/opt/slurm/bin/scontrol", "update", node, "state=fail", "reason=Action:Reboot"],
    ]
    assert json.loads((tmp_path / RECOVERY_FILE.lstrip("/")).read_text()) == {"gpu": 1_000_000.0}
    now[0] += 3600  # rebooted, and the GPU is still missing an hour later
    assert plan_actions(situation(ctx), [GPU_DOWN], NodeState("IDLE"))[-1][-2:] == [
        "state=fail",
        "reason=Action:Replace",
    ]
    now[0] += 2 * 86400  # a fault days later gets a reboot first again
    assert plan_actions(situation(ctx), [GPU_DOWN], NodeState("IDLE"))[-1][-1] == "reason=Action:Reboot"


def test_hyperpod_leaves_recovering_nodes_alone_and_drains_for_other_faults(tmp_path: Path) -> None:
    ctx = context(tmp_path, p5_facts(platform="hyperpod"))
    assert plan_actions(situation(ctx), [GPU_DOWN], NodeState("IDLE+FAIL", "Action:Reboot")) == []
    assert plan_actions(situation(ctx), [GPU_DOWN], NodeState("IDLE+DRAIN", "Action:Replace")) == []
    assert plan_actions(situation(ctx), [DISK_FULL], NodeState("IDLE")) == [
        [
            "/opt/slurm/bin/scontrol",
            "update",
            "nodename=ip-10-1-0-11",
            "state=drain",
            "reason=hyperpod-cdk:disk: / has 3.0 GiB free of 200.0 GiB, needs 10.0",
        ]
    ]
    assert plan_actions(situation(ctx), [DCGM_FAILED], NodeState("IDLE"))[-1][-1] == "reason=Action:Reboot"
    healed = NodeState("IDLE", comment="hyperpod-cdk:gpu: nvidia-smi lists 7 of 8 GPUs")
    assert plan_actions(situation(ctx), HEALTHY, healed) == [
        ["/opt/slurm/bin/scontrol", "update", "nodename=ip-10-1-0-11", "comment="]
    ]


def test_hyperpod_drain_only_option(tmp_path: Path) -> None:
    ctx = context(tmp_path, p5_facts(platform="hyperpod"), options=HealthOptions(on_hyperpod="drain"))
    assert plan_actions(situation(ctx), [GPU_DOWN], NodeState("IDLE")) == [
        [
            "/opt/slurm/bin/scontrol",
            "update",
            "nodename=ip-10-1-0-11",
            "state=drain",
            "reason=hyperpod-cdk:gpu: nvidia-smi lists 7 of 8 GPUs",
        ]
    ]


# --- modes and exit status ------------------------------------------------------------------------------


def test_prolog_drains_and_fails_so_slurm_requeues_the_job(tmp_path: Path) -> None:
    runner = RecordingRunner({("scontrol", "show"): (0, show("ALLOCATED"))})
    _, status = check_and_act(
        context(tmp_path, cpu_facts(gpus=8, shared_mount=None), runner=runner, mode=health.PROLOG)
    )
    assert status == 1
    assert runner.ran("scontrol", "update") == [
        [
            "scontrol",
            "update",
            "nodename=workers-1",
            "state=drain",
            "reason=hyperpod-cdk:gpu: nvidia-smi not found; 8 GPUs expected",
        ]
    ]


def test_a_healthy_prolog_asks_slurm_nothing(tmp_path: Path) -> None:
    runner = RecordingRunner()
    _, status = check_and_act(context(tmp_path, cpu_facts(shared_mount=None), runner=runner, mode=health.PROLOG))
    assert status == 0 and runner.commands == []
    log = (tmp_path / "var/log/hyperpod-cdk/health.log").read_text().splitlines()
    assert json.loads(log[-1])["event"] == "health" and json.loads(log[-1])["failed"] == []


def test_periodic_waits_for_bootstrap_then_drains_and_exits_0(tmp_path: Path) -> None:
    runner = RecordingRunner({("scontrol", "show"): (0, show("IDLE"))})
    ctx = context(tmp_path, cpu_facts(gpus=8, shared_mount=None), runner=runner)
    assert check_and_act(ctx) == ([], 0) and runner.commands == []
    touch(tmp_path, DONE_MARKER, "{}")
    _, status = check_and_act(ctx)
    assert status == 0 and runner.ran("scontrol", "update")[0][3] == "state=drain"


def test_periodic_does_nothing_when_slurm_cannot_be_reached(tmp_path: Path) -> None:
    runner = RecordingRunner({("scontrol", "show"): (1, "slurm_load_node: Unable to contact slurm controller\n")})
    touch(tmp_path, DONE_MARKER, "{}")
    _, status = check_and_act(context(tmp_path, cpu_facts(gpus=8, shared_mount=None), runner=runner))
    assert status == 0 and runner.ran("scontrol", "update") == []


def test_report_never_touches_slurm(tmp_path: Path) -> None:
    runner = RecordingRunner()
    _, status = check_and_act(
        context(tmp_path, cpu_facts(gpus=8, shared_mount=None), runner=runner, mode=health.REPORT)
    )
    assert status == 1 and runner.commands == []


def run_health(root: Path, *args: str, module: str = "training_runtime") -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", module] + (["health"] if module == "training_runtime" else [])
    return subprocess.run(
        [*command, *args, "--root", str(root)],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("module", ["training_runtime", "training_runtime.health"])
def test_report_runs_for_real_against_a_fake_root(tmp_path: Path, module: str) -> None:
    touch(tmp_path, "/etc/hyperpod-cdk/node.json", cpu_facts().dumps())
    (tmp_path / "fsx").mkdir()
    result = run_health(tmp_path, "--report", module=module)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = [line.split(None, 2) for line in result.stdout.splitlines()]
    assert [r[:2] for r in rows] == [
        ["gpu", "skipped"],
        ["dcgm", "skipped"],
        ["neuron", "skipped"],
        ["efa", "skipped"],
        ["shared-storage", "ok"],
        ["disk", "ok"],
    ]
    touch(tmp_path, "/etc/hyperpod-cdk/node.json", cpu_facts(efa_interfaces=2).dumps())
    failing = run_health(tmp_path, "--report", "--json", module=module)
    assert failing.returncode == 1
    efa = [json.loads(line) for line in failing.stdout.splitlines()][3]
    assert efa == {"name": "efa", "status": "failed", "detail": "fi_info not found; 2 EFA interfaces expected"}


def test_the_programs_run_in_the_empty_environment_slurmd_gives_them(tmp_path: Path) -> None:
    """slurmd starts HealthCheckProgram and Prolog without PATH: the wrapper's ``python3`` is found by the
    shell, and Python then has no ``sys.executable`` (the probe must still find an interpreter)."""
    touch(tmp_path, "/etc/hyperpod-cdk/node.json", cpu_facts().dumps())
    (tmp_path / "fsx").mkdir()
    result = subprocess.run(
        ["/bin/sh", "-c", 'exec python3 -m training_runtime.health --report --root "$0"', str(tmp_path)],
        env={"PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "shared-storage   ok       /fsx writable" in result.stdout


def test_without_facts_the_programs_never_fail_a_job(tmp_path: Path) -> None:
    assert run_health(tmp_path, "--prolog", module="training_runtime.health").returncode == 0
    report = run_health(tmp_path, "--report", module="training_runtime.health")
    assert report.returncode == 2 and "node.json does not exist" in report.stderr


# --- options --------------------------------------------------------------------------------------------


def test_health_options_defaults_and_rules() -> None:
    assert parse_options({}).health == HealthOptions(True, 10, 1, "recover")
    assert parse_options({"health": {"enabled": False}}).health.enabled is False
    problems = options_problems(
        {"health": {"min_free_disk_gib": -1, "dcgm_level": 2, "on_hyperpod": "reboot", "interval": 60}}
    )
    assert problems == [
        "options.health.interval: unknown option; allowed: enabled, min_free_disk_gib, dcgm_level, on_hyperpod",
        "options.health.min_free_disk_gib: got -1; expected 0 (no disk check) or more GiB",
        "options.health.dcgm_level: got 2; allowed: 0 (off), 1. Levels 2 and up run for minutes, longer than a "
        "prolog should take. Fix: use 1, and run deeper diagnostics on a drained node (dcgmi diag -r 3)",
        "options.health.on_hyperpod: got 'reboot'; allowed: recover, drain",
    ]
    assert options_problems({"health": {"enabled": "yes"}}) == [
        "options.health.enabled: got 'yes'; expected true or false"
    ]


# --- the step and the wiring ----------------------------------------------------------------------------


def names(steps: Sequence[Any]) -> list[str]:
    return [s.name for s in steps]


def test_generic_compute_nodes_get_the_programs(tmp_path: Path) -> None:
    node = fake_node(tmp_path, options={"health": {"min_free_disk_gib": 20}})
    step = HealthPrograms()
    assert step.needed(node)
    step.apply(node)
    assert not step.needed(node)
    for path, mode in ((HEALTH_CHECK, "periodic"), (PROLOG_PROGRAM, "prolog")):
        target = tmp_path / path.lstrip("/")
        assert target.read_text() == (
            "#!/bin/sh\n# Installed by hyperpod-cdk.\n"
            f'PYTHONPATH=/opt/hyperpod-cdk/lib exec python3 -m training_runtime.health --{mode} "$@"\n'
        )
        assert target.stat().st_mode & 0o777 == 0o755
    assert load_health_options(tmp_path) == HealthOptions(min_free_disk_gib=20)
    assert node.runner.commands == []  # type: ignore[attr-defined]
    assert HEALTH_CHECK == BIN_DIR + "/health-check" and health_program("prolog").endswith('--prolog "$@"\n')


def test_hyperpod_compute_nodes_get_a_timer(tmp_path: Path) -> None:
    runner = RecordingRunner({("systemctl", "is-enabled"): (1, "")})
    node = fake_node(tmp_path, mode="api-driven", runner=runner, options={"slurm": {"health_check_interval": 120}})
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    (tmp_path / "run/systemd/system").mkdir(parents=True)
    step = HealthPrograms()
    assert step.describe(node)[-1] == "systemctl enable --now hyperpod-cdk-health.timer (every 120 s)"
    step.apply(node)
    timer = (tmp_path / "etc/systemd/system" / TIMER).read_text()
    assert "OnUnitActiveSec=120s" in timer and "WantedBy=timers.target" in timer
    assert "ExecStart=/opt/hyperpod-cdk/bin/health-check" in (tmp_path / "etc/systemd/system" / SERVICE).read_text()
    assert runner.ran("systemctl", "daemon-reload") == [["systemctl", "daemon-reload"]]
    assert runner.ran("systemctl", "enable") == [["systemctl", "enable", "--now", TIMER]]
    running = RecordingRunner()
    again = fake_node(tmp_path, mode="api-driven", runner=running, options={"slurm": {"health_check_interval": 120}})
    assert not step.needed(again)


def test_the_step_runs_on_compute_nodes_right_after_the_installed_runtime(tmp_path: Path) -> None:
    worker = names(steps_for(fake_node(tmp_path / "w")))
    assert worker[:2] == ["installed-runtime", "health-checks"]
    assert "health-checks" not in names(steps_for(fake_node(tmp_path / "c", instance="controller-1")))
    assert "health-checks" not in names(steps_for(fake_node(tmp_path / "l", instance="login-1")))
    off = {"health": {"enabled": False}}
    assert "health-checks" not in names(steps_for(fake_node(tmp_path / "w", options=off)))
    node = fake_node(tmp_path / "h", mode="api-driven", options=off)
    (tmp_path / "h/opt/sagemaker_cluster").mkdir(parents=True)
    touch(tmp_path / "h", "/etc/systemd/system/" + TIMER, "[Timer]\n")
    [step] = [s for s in steps_for(node) if s.name == "health-checks"]
    assert isinstance(step, HealthTimerRemoved) and step.needed(node)
    step.apply(node)
    assert not step.needed(node)


def conf_lines(tmp_path: Path, options: Mapping[str, Any]) -> dict[str, str]:
    node = fake_node(tmp_path, options=options)
    [(_, slurm_conf, _, _)] = [f for f in rendered_files(node) if f[0].endswith("slurm.conf")]
    return dict(line.split("=", 1) for line in slurm_conf.splitlines() if "=" in line and not line.startswith("#"))


def test_slurm_conf_names_the_programs_on_the_generic_platform(tmp_path: Path) -> None:
    conf = conf_lines(tmp_path / "on", {"slurm": {"health_check_interval": 600}})
    assert conf["HealthCheckProgram"] == "/opt/hyperpod-cdk/bin/health-check"
    assert conf["HealthCheckInterval"] == "600"
    assert conf["HealthCheckNodeState"] == "ANY,CYCLE"
    assert conf["Prolog"] == "/opt/hyperpod-cdk/bin/prolog"
    assert conf["PrologFlags"] == "Alloc"
    assert conf["SchedulerParameters"] == "sched_interval=60,bf_interval=30,nohold_on_prolog_fail"
    off = conf_lines(tmp_path / "off", {"health": {"enabled": False}})
    assert not {"HealthCheckProgram", "Prolog", "PrologFlags"} & set(off)
    assert off["SchedulerParameters"] == "sched_interval=60,bf_interval=30"


def test_remedy_is_a_pure_decision_on_the_history_it_is_given() -> None:
    """No files, no commands: the recovery history goes in, the scontrol commands come out."""
    from training_runtime.health import Situation

    def decide(now: float, recoveries: dict[str, float]) -> list[list[str]]:
        at = Situation("ip-10-1-0-11", "scontrol", health.PERIODIC, True, "recover", now, recoveries)
        return plan_actions(at, [GPU_DOWN], NodeState("IDLE"))

    assert decide(1000.0, {})[-1][-1] == "reason=Action:Reboot"
    assert decide(1000.0 + 3600, {"gpu": 1000.0})[-1][-1] == "reason=Action:Replace"  # same fault within a day
    assert decide(1000.0 + 90000, {"gpu": 1000.0})[-1][-1] == "reason=Action:Reboot"  # a day later: reboot first
    assert decide(1000.0 + 3600, {"efa": 1000.0})[-1][-1] == "reason=Action:Reboot"  # another check's history
    drain_only = Situation("n", "scontrol", health.PERIODIC, True, "drain", 0.0, {})
    assert plan_actions(drain_only, [GPU_DOWN], NodeState("IDLE"))[0][3] == "state=drain"


def test_emulated_hardware_skips_only_the_declared_devices_and_says_so(tmp_path: Path) -> None:
    """The local cluster's nodes declare a type's devices (hyperpod_cdk.emulation.hardware): the device checks say so
    and skip; the checks of what the node really has (shared storage, disk) still run."""
    trn1 = p5_facts(instance_type="ml.trn1.32xlarge", gpus=0, neuron_devices=16, efa_interfaces=8)
    results = {r.name: r for r in run_checks(context(tmp_path / "real", trn1, mode=health.PROLOG))}
    assert results["neuron"].status == FAILED and results["efa"].status == FAILED, "a real trn1 without devices"
    emulated = {
        r.name: r
        for r in run_checks(context(tmp_path / "emulated", replace(trn1, emulated_hardware=True), mode=health.PROLOG))
    }
    assert emulated["neuron"].status == SKIPPED
    assert "emulated hardware: ml.trn1.32xlarge declares 16 Neuron devices" in emulated["neuron"].detail
    assert emulated["efa"].status == SKIPPED and "declares 8 EFA interfaces" in emulated["efa"].detail
    assert emulated["disk"].status == "ok", "what the node has is still checked"
    p5 = replace(p5_facts(), emulated_hardware=True)
    gpu = {r.name: r for r in run_checks(context(tmp_path / "p5", p5, mode=health.PROLOG))}
    assert gpu["gpu"].status == SKIPPED and "declares 8 GPUs" in gpu["gpu"].detail
    assert gpu["dcgm"].status == SKIPPED and "emulated hardware" in gpu["dcgm"].detail
