"""`status --slurm` against a moto server: the Slurm state read on the controller through SSM, joined to the
instances; a node Slurm does not list; SSM failures; and `status` without the flag unchanged.

The SSM session is a named fake (``ControllerSays``, handed to the context as its capture executor): moto has no
``sagemaker-cluster:`` SSM target and no node to run ``scontrol`` on. The local test
(tests/test_local_control_plane.py) runs the same command on a real controller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from hyperpod_cdk.ops.context import Captured, capture_process
from ops_support import MotoCluster, Operator, aws_env, moto_url  # noqa: F401

pytestmark = pytest.mark.usefixtures("aws_env")


def gpu_cluster() -> MotoCluster:
    """controller ip-10-1-0-1, login ip-10-1-0-2, p5 ip-10-1-0-3 and ip-10-1-0-4."""
    return MotoCluster(
        "gpu",
        {
            "controller": ("ml.m5.xlarge", 1, "Controller"),
            "login": ("ml.m5.xlarge", 1, "Login"),
            "p5": ("ml.p5.48xlarge", 2, "Compute"),
        },
    ).create()


def scontrol_line(
    name: str, address: str, state: str, reason: str = "", cpus: int = 0, version: str = "24.11.5"
) -> str:
    """One ``scontrol -o show nodes`` line as Slurm 24.11 prints it (fields cut to the usual ones)."""
    line = (
        f"NodeName={name} Arch=x86_64 CoresPerSocket=48 CPUAlloc={cpus} CPUEfctv=192 CPUTot=192 CPULoad=0.01 "
        f"AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:8 NodeAddr={address} NodeHostName={name} "
        f"Version={version} OS=Linux 6.8.0 RealMemory=2000000 AllocMem=0 FreeMem=1900000 Sockets=2 Boards=1 "
        f"State={state} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=p5 "
        "BootTime=2026-11-20T10:00:00 SlurmdStartTime=2026-11-20T10:05:00 LastBusyTime=2026-11-20T11:00:00 "
        "ResumeAfterTime=None CfgTRES=cpu=192,mem=2000000M AllocTRES= CurrentWatts=0 AveWatts=0"
    )
    return line + (f" Reason={reason} [root@2026-11-20T11:30:00]" if reason else "")


@dataclass
class ControllerSays:
    """What the SSM session prints: the plugin's own lines around the command's output, its stderr, its exit."""

    lines: list[str]
    code: int = 0
    stderr: str = ""

    def __call__(self, argv: list[str]) -> Captured:
        body = "\r\n".join(self.lines)
        stdout = (
            f"\r\nStarting session with SessionId: op-0a1b\r\n{body}\r\n\r\n"
            "Exiting session with sessionId: op-0a1b.\r\n"
        )
        return Captured(self.code, stdout if self.lines else "", self.stderr)


def slurm_of(report: dict[str, object], instance_id: str) -> dict[str, object]:
    nodes = report["nodes"]
    assert isinstance(nodes, list)
    return next(n["slurm"] for n in nodes if n["instance_id"] == instance_id)


def test_slurm_state_is_read_on_the_controller_and_joined_to_each_instance() -> None:
    cluster = gpu_cluster()
    first, second = cluster.ids["p5"]
    controller = cluster.ids["controller"][0]
    says = ControllerSays(
        [
            scontrol_line("ip-10-1-0-3", "10.1.0.3", "MIXED", cpus=96),
            scontrol_line("ip-10-1-0-4", "10.1.0.4", "IDLE+DRAIN", reason="Action:Replace gpu 3 xid 79"),
            scontrol_line("ip-10-1-0-99", "10.1.0.99", "DOWN*"),  # a Slurm node with no instance: not shown
        ]
    )
    operator = Operator(ssm_command=says)
    result = operator("status", "gpu", "--slurm", "--json", "--region", "us-west-2")
    assert result.code == 0, result.err
    assert operator.captured == [
        [
            "aws",
            "ssm",
            "start-session",
            "--target",
            f"sagemaker-cluster:{cluster.id}_controller-{controller}",
            "--document-name",
            "AWS-StartNonInteractiveCommand",
            "--parameters",
            json.dumps({"command": ["scontrol -o show nodes; scontrol --version"]}, separators=(",", ":")),
            "--region",
            "us-west-2",
        ]
    ]
    report = result.json()
    assert report["slurm_note"] is None
    assert slurm_of(report, first) == {"listed": True, "name": "ip-10-1-0-3", "state": "mixed", "reason": None}
    assert slurm_of(report, second) == {
        "listed": True,
        "name": "ip-10-1-0-4",
        "state": "drained",
        "reason": "Action:Replace gpu 3 xid 79",
    }
    assert slurm_of(report, controller) == {"listed": False}  # the controller is not a Slurm node
    assert len(report["nodes"]) == 4

    human = Operator(ssm_command=says)("status", "gpu", "--slurm")
    assert human.code == 0, human.err
    row = next(line for line in human.out.splitlines() if second in line)
    assert "ip-10-1-0-4 drained (Action:Replace gpu 3 xid 79)" in row
    assert "ip-10-1-0-3 mixed" in next(line for line in human.out.splitlines() if first in line)
    assert "not in Slurm" in next(line for line in human.out.splitlines() if controller in line)


def test_a_cluster_that_names_slurm_nodes_by_instance_name_joins_by_node_address() -> None:
    cluster = gpu_cluster()
    first, second = cluster.ids["p5"]
    says = ControllerSays(
        [
            scontrol_line("p5-1", "10.1.0.3", "ALLOCATED", cpus=192),
            scontrol_line("p5-2", "10.1.0.4", "ALLOCATED+DRAIN", reason="maintenance", cpus=192),
        ]
    )
    report = Operator(ssm_command=says)("status", "gpu", "--slurm", "--json").json()
    assert slurm_of(report, first)["name"] == "p5-1" and slurm_of(report, first)["state"] == "allocated"
    assert slurm_of(report, second)["state"] == "draining"  # drain with a job still running


def test_a_node_slurm_does_not_list_and_one_it_does_not_hear_from() -> None:
    cluster = gpu_cluster()
    first, second = cluster.ids["p5"]
    says = ControllerSays([scontrol_line("ip-10-1-0-3", "10.1.0.3", "IDLE*")])
    report = Operator(ssm_command=says)("status", "gpu", "--slurm", "--json").json()
    assert slurm_of(report, first)["state"] == "idle*"
    assert slurm_of(report, second) == {"listed": False}
    assert report["slurm_note"] is None


def test_group_filter_still_asks_the_controller() -> None:
    cluster = gpu_cluster()
    operator = Operator(ssm_command=ControllerSays([scontrol_line("ip-10-1-0-4", "10.1.0.4", "IDLE")]))
    report = operator("status", "gpu", "--group", "p5", "--slurm", "--json").json()
    assert [n["instance_id"] for n in report["nodes"]] == cluster.ids["p5"]
    assert f"_controller-{cluster.ids['controller'][0]}" in operator.captured[0][4]
    assert slurm_of(report, cluster.ids["p5"][1])["state"] == "idle"


@pytest.mark.parametrize(
    ("says", "why"),
    [
        (
            ControllerSays([], 255, "\nSessionManagerPlugin is not found. Please refer to SessionManager docs"),
            "exited 255: SessionManagerPlugin is not found",
        ),
        (
            ControllerSays(
                [],
                254,
                "An error occurred (AccessDeniedException) when calling the StartSession operation: User: arn:aws:"
                "iam::123456789012:user/ops is not authorized to perform: ssm:StartSession",
            ),
            "exited 254: An error occurred (AccessDeniedException)",
        ),
        (ControllerSays([], 124, "no answer in 60 s"), "exited 124: no answer in 60 s"),
        (ControllerSays(["scontrol: command not found"], 0), "printed no Slurm node: "),
    ],
    ids=["no-plugin", "access-denied", "timeout", "no-scontrol"],
)
def test_an_ssm_failure_keeps_the_api_view_and_says_why(says: ControllerSays, why: str) -> None:
    cluster = gpu_cluster()
    cluster.group("p5")["Status"] = "Degraded"  # the exit status stays the cluster's
    result = Operator(ssm_command=says)("status", "gpu", "--slurm")
    assert result.code == 1, result.err
    notes = [line for line in result.out.splitlines() if line.startswith("Slurm state not shown:")]
    assert len(notes) == 1 and why in notes[0], result.out
    assert f"sagemaker-cluster:{cluster.id}_controller-" in notes[0]
    assert cluster.ids["p5"][1] in result.out and "ip-10-1-0-4" in result.out  # the API view is all there

    report = Operator(ssm_command=says)("status", "gpu", "--slurm", "--json").json()
    assert why in report["slurm_note"] and report["exit_status"] == 1
    assert {json.dumps(n["slurm"]) for n in report["nodes"]} == {json.dumps({"listed": False})}


def test_a_cluster_without_a_controller_group_says_so() -> None:
    MotoCluster("plain", {"workers": ("ml.m5.xlarge", 1, None)}).create()
    operator = Operator()
    report = operator("status", "plain", "--slurm", "--json").json()
    assert operator.captured == []
    assert report["slurm_note"].startswith("no controller to ask:")


def test_without_slurm_status_runs_nothing_and_shows_what_it_did() -> None:
    cluster = gpu_cluster()
    operator = Operator()  # no ssm_command: any session would fail the test
    report = operator("status", "gpu", "--json").json()
    assert operator.captured == []
    assert "slurm_note" not in report and all("slurm" not in n for n in report["nodes"])
    human = operator("status", "gpu")
    assert operator.captured == []
    header = next(line for line in human.out.splitlines() if "Instance" in line and "Launched" in line)
    assert "Slurm hostname" in header and "Slurm " not in header.replace("Slurm hostname", "")
    assert "not in Slurm" not in human.out and "Slurm state not shown" not in human.out
    assert cluster.ids["p5"][0] in human.out


def test_the_default_capture_reports_a_missing_program_and_a_timeout() -> None:
    missing = capture_process(["hyperpod-cdk-no-such-program"], 5.0)
    assert missing.code == 127 and "not on PATH" in missing.stderr
    slow = capture_process(["sleep", "30"], 0.2)
    assert slow.code == 124 and "no answer" in slow.stderr
    done = capture_process(["sh", "-c", "echo out; echo err >&2; exit 3"], 5.0)
    assert (done.code, done.stdout, done.stderr) == (3, "out\n", "err\n")


def test_the_releases_running_are_read_and_each_says_whether_it_is_affected_and_what_fixes_it() -> None:
    """The security gate on the running cluster: the controller's `scontrol --version` and each node's slurmd
    `Version=`, each judged by the table; one line per release, and `slurm_security` in --json."""
    gpu_cluster()
    says = ControllerSays(
        [
            scontrol_line("ip-10-1-0-3", "10.1.0.3", "IDLE", version="25.11.8"),
            scontrol_line("ip-10-1-0-4", "10.1.0.4", "IDLE", version="24.11.0"),
            "slurm 25.11.8",
        ]
    )
    report = Operator(ssm_command=says)("status", "gpu", "--slurm", "--json").json()
    found = {entry["version"]: entry for entry in report["slurm_security"]}
    assert set(found) == {"24.11.0", "25.11.8"}
    assert found["25.11.8"]["where"] == ["controller", "ip-10-1-0-3"] and found["25.11.8"]["affected"] is False
    old = found["24.11.0"]
    assert old["where"] == ["ip-10-1-0-4"] and old["affected"] is True
    assert "CVE-2026-65107" in old["cves"] and "CVE-2025-43904" in old["cves"]
    assert old["fixed_by"].startswith("no fixed release exists for the 24.11 line")
    human = Operator(ssm_command=says)("status", "gpu", "--slurm")
    lines = [line for line in human.out.splitlines() if line.startswith("Slurm security:")]
    assert len(lines) == 2 and any("Slurm 24.11.0 is affected by 9 CVE(s)" in line for line in lines), lines
    assert any("Slurm 25.11.8 is affected by no advisory" in line for line in lines), lines
    plain = Operator(ssm_command=says)("status", "gpu", "--json").json()
    assert "slurm_security" not in plain  # without --slurm nothing is read on the controller


def test_a_cluster_one_patch_release_short_of_the_fix_is_affected() -> None:
    gpu_cluster()
    says = ControllerSays([scontrol_line("ip-10-1-0-3", "10.1.0.3", "IDLE", version="25.11.7"), "slurm 25.11.7"])
    (entry,) = Operator(ssm_command=says)("status", "gpu", "--slurm", "--json").json()["slurm_security"]
    assert entry["version"] == "25.11.7" and entry["affected"] is True and entry["fixed_by"] == "Slurm 25.11.8 or later"
