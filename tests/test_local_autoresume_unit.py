"""The auto-resume wrapper's decisions and the emulated HyperPod agent's request handling (no cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from hyperpod_local import agent, autoresume
from hyperpod_local.agent import AgentRequestError, Request, decide, parse_request, recovery_requests
from hyperpod_local.autoresume import MAX_ATTEMPTS, RETRYSTEP, UsageError, next_action, nodes_back, split_option
from training_runtime.health.results import REBOOT, REPLACE
from training_runtime.node_names import NAMING_MODES, slurm_name

NODES = ("worker-group-1-1", "worker-group-1-2", "login-group-1")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--auto-resume=1", "-N2", "train.sh"], (True, ["-N2", "train.sh"])),
        (["-N2", "--auto-resume", "1", "train.sh", "x"], (True, ["-N2", "train.sh", "x"])),
        (["--auto-resume=0", "train.sh"], (False, ["train.sh"])),
        (["-N2", "train.sh"], (False, ["-N2", "train.sh"])),
        # After the command, the option belongs to the command.
        (["-N1", "prog", "--auto-resume=1"], (False, ["-N1", "prog", "--auto-resume=1"])),
    ],
)
def test_the_option_is_taken_out_before_the_real_srun_sees_it(argv: list[str], expected: object) -> None:
    assert split_option(argv) == expected


@pytest.mark.parametrize("argv", [["--auto-resume=yes", "x"], ["--auto-resume"], ["--auto-resume=2", "x"]])
def test_a_bad_value_is_an_error_naming_the_allowed_ones(argv: list[str]) -> None:
    with pytest.raises(UsageError, match=r"0 and 1|0 or 1"):
        split_option(argv)


def test_only_a_failed_uncancelled_step_the_agent_answers_retrystep_is_retried() -> None:
    retry = {"action": RETRYSTEP, "replaced": ["worker-group-1-2"]}
    assert next_action(1, False, retry, 0) == "retry"
    assert next_action(0, False, retry, 0) == "done"  # the step succeeded
    assert next_action(1, True, retry, 0) == "done"  # scancel / Ctrl-C: never retried
    assert next_action(1, False, None, 0) == "done"  # no agent answered
    assert next_action(1, False, {"action": "NONE", "replaced": []}, 0) == "done"  # nothing was faulty
    assert next_action(1, False, retry, MAX_ATTEMPTS - 1) == "retry"
    assert next_action(1, False, retry, MAX_ATTEMPTS) == "done"


def test_nodes_are_back_only_when_each_is_allocated_and_responding() -> None:
    nodes = ["worker-group-1-1", "worker-group-1-2"]
    assert nodes_back("worker-group-1-1 allocated\nworker-group-1-2 mixed\n", nodes)
    assert not nodes_back("worker-group-1-1 allocated\nworker-group-1-2 allocated*\n", nodes)  # not responding
    assert not nodes_back("worker-group-1-1 allocated\nworker-group-1-2 idle\n", nodes)  # left the job
    assert not nodes_back("worker-group-1-1 allocated\n", nodes)
    assert not nodes_back("", [])


def request(**fields: object) -> str:
    data: dict[str, object] = {"job_id": "42", "nodes": list(NODES[:2]), "step_started": 1000.0, "exit_code": 1}
    data.update(fields)
    return json.dumps(data)


def test_a_request_is_read_and_every_bad_field_is_named() -> None:
    assert parse_request(request(), NODES) == Request("42", NODES[:2], 1000.0)
    with pytest.raises(AgentRequestError) as error:
        parse_request(request(job_id="42; rm -rf /", nodes=["worker-group-1-2", "evil"], step_started="x"), NODES)
    message = str(error.value)
    assert "job_id" in message and "evil not in this cluster" in message and "step_started" in message
    for bad in ("[]", "not json", request(nodes=[]), request(nodes="worker-group-1-1"), request(step_started=True)):
        with pytest.raises(AgentRequestError):
            parse_request(bad, NODES)


def test_the_agent_replaces_unhealthy_nodes_once_per_step() -> None:
    step = Request("42", NODES[:2], 1000.0)
    # A node that died during the step and was already replaced (the liveness path): retry, nothing to do.
    assert decide(step, {"worker-group-1-2": 1005.0}, set()) == ([], ["worker-group-1-2"])
    # Replaced before the step started: it does not explain this failure.
    assert decide(step, {"worker-group-1-2": 900.0}, set()) == ([], [])
    # Unhealthy and not replaced yet: replace it; a node outside the job is none of this request's business.
    assert decide(step, {}, {"worker-group-1-2", "worker-group-1-9"}) == (["worker-group-1-2"], [])
    assert decide(step, {}, set()) == ([], [])
    assert agent.answer([]) == {"action": "NONE", "replaced": []}
    assert agent.answer(["b", "a", "b"]) == {"action": RETRYSTEP, "replaced": ["a", "b"]}


def test_only_hyperpods_two_exact_reasons_ask_for_a_reboot_or_a_replacement() -> None:
    sinfo = "\n".join(
        [
            "w-1|Action:Replace",
            "w-2|Action:Reboot",
            "w-1|Action:Replace",  # the same node in a second partition: once
            "w-3|hyperpod-cdk:efa: 1 of 2 interfaces",
            # Near-misses HyperPod ignores: another case, more text, a space, punctuation, the bare word.
            "w-4|action:replace",
            "w-5|Action:Replace please",
            "w-6|Action: Reboot",
            "w-7|Action:Reboot ",
            "w-8|Action:Reboot.",
            "w-9|Reboot",
            "w-10|none",
        ]
    )
    assert recovery_requests(sinfo) == [("w-1", REPLACE), ("w-2", REBOOT)]


def test_the_installed_wrapper_is_this_module_and_runs_on_its_own() -> None:
    source = agent.wrapper_source()
    assert "from hyperpod_cdk" not in source and "import hyperpod_cdk" not in source
    assert source == Path(autoresume.__file__).read_text()


class FakeNamespaces:
    def __init__(self, dead: set[str]) -> None:
        self.dead = dead

    def alive(self, name: str) -> bool:
        return name not in self.dead


ADDRESSES = {name: f"10.238.0.{11 + i}" for i, name in enumerate(NODES)}


@pytest.fixture(params=NAMING_MODES)
def names(request: pytest.FixtureRequest) -> dict[str, str]:
    """The nodes' Slurm names on the emulated HyperPod platform in each naming (``ip-a-b-c-d`` or the instance
    names), which jobs (and so the mailbox) use."""
    return {name: slurm_name(str(request.param), name, address) for name, address in ADDRESSES.items()}


class FakeCluster:
    """What the agent's request handling reads of a cluster: work directory, nodes, names, liveness."""

    def __init__(self, workdir: Path, dead: set[str], names: dict[str, str]) -> None:
        self.workdir = workdir
        self.names = names
        self.layout = SimpleNamespace(
            nodes=[SimpleNamespace(name=n) for n in NODES],
            workers=[SimpleNamespace(name=n) for n in NODES[:2]],
            controllers=[],
        )
        self.namespaces = FakeNamespaces(dead)
        self.calls: list[tuple[str, str]] = []

    def slurm_name(self, name: str) -> str:
        return self.names[name]

    def replace(self, name: str) -> tuple[int, str]:
        self.calls.append(("replace", name))
        return 0, "done"

    def reboot(self, name: str) -> None:
        self.calls.append(("reboot", name))


def test_the_agent_answers_each_request_once_replacing_what_is_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: dict[str, str]
) -> None:
    cluster = FakeCluster(tmp_path, dead=set(), names=names)
    for sub in ("requests", "answers", "replaced"):
        (agent.mailbox_dir(cluster) / sub).mkdir(parents=True)  # type: ignore[arg-type]
    (tmp_path / agent.DIRECTORY).mkdir(parents=True)
    worker = agent.Agent(cluster)  # type: ignore[arg-type]
    replaced: list[str] = []

    def replace(name: str, reason: str) -> bool:
        replaced.append(name)
        worker.replaced_at[name] = 2000.0
        return True

    monkeypatch.setattr(worker, "replace", replace)
    cluster.namespaces.dead.add("worker-group-1-2")  # died after the agent started watching
    requests = agent.mailbox_dir(cluster) / "requests"  # type: ignore[arg-type]
    answers = agent.mailbox_dir(cluster) / "answers"  # type: ignore[arg-type]
    # The job names its nodes by their Slurm names; the agent replaces instances and answers in Slurm names.
    job_nodes = [names[n] for n in NODES[:2]]
    (requests / "42-1-0.json").write_text(request(nodes=job_nodes))
    (requests / "bad.json").write_text(request(nodes=["nobody"]))
    (requests / ".43-1-0.json").write_text(request())  # still being written: not read
    worker.answer_requests()
    assert replaced == ["worker-group-1-2"]
    expected = {"action": RETRYSTEP, "replaced": [names["worker-group-1-2"]]}
    assert json.loads((answers / "42-1-0.json").read_text()) == expected
    bad = json.loads((answers / "bad.json").read_text())
    assert bad["action"] == "NONE" and "nobody not in this cluster" in bad["error"]
    assert sorted(p.name for p in requests.iterdir()) == [".43-1-0.json"]
    # Asked again for the same step: the node was replaced for it already, no second replacement.
    (requests / "42-1-1.json").write_text(request(nodes=job_nodes))
    worker.answer_requests()
    assert replaced == ["worker-group-1-2"]
    assert json.loads((answers / "42-1-1.json").read_text())["action"] == RETRYSTEP


def reason_agent(
    tmp_path: Path, reasons: str, monkeypatch: pytest.MonkeyPatch, names: dict[str, str]
) -> tuple[FakeCluster, list[list[str]]]:
    """A cluster and the commands the agent ran on its controller after one poll, sinfo showing ``reasons``."""
    cluster = FakeCluster(tmp_path, dead=set(), names=names)
    for sub in ("requests", "answers", "replaced"):
        (agent.mailbox_dir(cluster) / sub).mkdir(parents=True)  # type: ignore[arg-type]
    (tmp_path / agent.DIRECTORY).mkdir(parents=True)
    worker = agent.Agent(cluster)  # type: ignore[arg-type]
    asked: list[list[str]] = []

    def controller(argv: list[str]) -> str:
        asked.append(argv)
        return reasons

    monkeypatch.setattr(worker, "_controller_exec", controller)
    worker.poll()
    return cluster, asked


def test_a_slurm_replace_reason_replaces_the_instance_and_the_notice_has_the_slurm_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: dict[str, str]
) -> None:
    name = names["worker-group-1-1"]
    reasons = f"{name}|Action:Replace\n{names['login-group-1']}|Action:Replace\n"
    cluster, asked = reason_agent(tmp_path, reasons, monkeypatch, names)
    assert cluster.calls == [("replace", "worker-group-1-1")]  # the login node is not the agent's to replace
    assert (agent.mailbox_dir(cluster) / "replaced" / f"{name}.json").exists()  # type: ignore[arg-type]
    assert ["scontrol", "update", f"nodename={name}", "state=resume"] in asked


def test_a_slurm_reboot_reason_reboots_the_instance_and_returns_it_to_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: dict[str, str]
) -> None:
    name = names["worker-group-1-2"]
    reasons = f"{name}|Action:Reboot\n{names['worker-group-1-1']}|Action:Reboot please\n"
    cluster, asked = reason_agent(tmp_path, reasons, monkeypatch, names)
    assert cluster.calls == [("reboot", "worker-group-1-2")]  # rebooted, not replaced; the near-miss left alone
    assert ["scontrol", "update", f"nodename={name}", "state=resume"] in asked
    # A job's step on the rebooted node lost its processes: the auto-resume wrapper sees the notice.
    assert (agent.mailbox_dir(cluster) / "replaced" / f"{name}.json").exists()  # type: ignore[arg-type]
    events = [(e["node"], e["event"]) for e in agent.events(cluster)]  # type: ignore[arg-type]
    assert events == [("worker-group-1-2", "rebooting"), ("worker-group-1-2", "rebooted")]
