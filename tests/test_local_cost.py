"""Teams and budgets on a local cluster (issue #32): two teams as Slurm accounts, one whose budget is used up. Its
new job waits with Slurm's reason while the other team's job runs; a running job is never killed at the limit; an
account's usage equals the figure computed by hand from sacct; re-running the controller's bootstrap changes
nothing. One cluster for the module (generic platform)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import pytest
import yaml

from hyperpod_local import LocalCluster
from hyperpod_local.plan import UpOptions
from local_support import CPU_CLUSTER, requires_local_cluster, variant
from training_runtime.billing import billing_minutes
from training_runtime.node import GENERIC

pytestmark = [requires_local_cluster, pytest.mark.slow]

CONTROLLER, LOGIN = "controller-machine-1", "login-group-1"
NLP_BUDGET = 0.003
"""3 billing-minutes: one 1-CPU job with a 2-minute limit fits, a second one beside it does not."""
TEAMS = {
    "enforce_accounts": True,
    "users": [{"name": "alice", "uid": 2101}, {"name": "bob", "uid": 2102}],
    "teams": [
        {"name": "vision", "users": ["alice"], "budget": {"amount": 0, "period": "month"}},
        {
            "name": "nlp",
            "users": ["bob"],
            "fairshare": 10,
            "qos": {"max_nodes": 2, "max_wall": "00:10:00", "priority": 5},
            "budget": {"amount": NLP_BUDGET, "period": "month"},
        },
    ],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    workdir = tmp_path_factory.mktemp("local-cost")
    config = workdir / "teams.yaml"
    config.write_text(yaml.safe_dump({**yaml.safe_load(CPU_CLUSTER.read_text()), **TEAMS}))
    started = time.monotonic()
    cluster = LocalCluster.up(
        config,
        workdir / "work",
        variant(platform=GENERIC),
        UpOptions(prefix=f"hpco{os.getpid() % 10000}", subnet="10.236.0.0/24"),
    )
    print(f"local cluster up in {time.monotonic() - started:.0f} s")
    try:
        yield cluster
    finally:
        cluster.down()


def run(cluster: LocalCluster, node: str, *argv: str) -> str:
    result = cluster.exec(node, list(argv), timeout=120)
    assert result.returncode == 0, f"{node}: {' '.join(argv)}\n{result.stdout}{result.stderr}"
    return result.stdout


def submit(cluster: LocalCluster, user: str, *options: str) -> str:
    return run(cluster, LOGIN, "runuser", "-u", user, "--", "sbatch", "--parsable", "-o", "/dev/null", *options).strip()


def job(cluster: LocalCluster, job_id: str) -> tuple[str, str]:
    """(state, reason) from squeue, or (sacct's state, '') once the job has left the queue."""
    queued = run(cluster, CONTROLLER, "squeue", "-h", "-j", job_id, "-o", "%T|%r").strip()
    if queued:
        state, reason = queued.split("|")
        return state, reason
    return run(cluster, CONTROLLER, "sacct", "-n", "-X", "-P", "-j", job_id, "-o", "state").strip(), ""


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 150.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_teams_are_accounts_with_their_budgets(cluster: LocalCluster) -> None:
    rows = run(
        cluster, CONTROLLER, "sacctmgr", "-n", "-P", "show", "assoc", "format=account,user,grptresmins,fairshare"
    )
    assert {"vision||billing=0|1", f"nlp||billing={billing_minutes(NLP_BUDGET)}|10"} <= set(rows.split())
    assert {"vision|alice||1", "nlp|bob||1"} <= set(rows.split())
    qos = run(
        cluster,
        CONTROLLER,
        "sacctmgr",
        "-n",
        "-P",
        "show",
        "qos",
        "where",
        "name=nlp",
        "format=grptres,maxwall,priority",
    )
    assert qos.split() == ["node=2|00:10:00|5"]
    nlp = run(
        cluster,
        CONTROLLER,
        "sacctmgr",
        "-n",
        "-P",
        "show",
        "assoc",
        "where",
        "account=nlp",
        "format=user,qos,defaultqos",
    )
    assert set(nlp.split()) == {"|nlp|nlp", "bob|nlp|nlp"}
    users = run(cluster, CONTROLLER, "sacctmgr", "-n", "-P", "show", "user", "format=user,defaultaccount")
    assert {"alice|vision", "bob|nlp"} <= set(users.split())
    conf = run(cluster, CONTROLLER, "scontrol", "show", "config")
    for key, value in (
        ("AccountingStorageEnforce", "associations,limits,qos,safe"),
        ("PriorityType", "priority/multifactor"),
        ("PriorityDecayHalfLife", "00:00:00"),
        ("PriorityUsageResetPeriod", "MONTHLY"),
    ):
        assert any(
            line.split("=")[0].strip() == key and line.split("=", 1)[1].strip() == value for line in conf.splitlines()
        ), key


def test_over_budget_team_waits_while_the_other_runs_and_running_jobs_are_not_killed(cluster: LocalCluster) -> None:
    held = submit(cluster, "alice", "-t", "1", "--wrap", "true")
    first = submit(cluster, "bob", "-t", "2", "-n", "1", "--wrap", "sleep 20")
    wait_for(lambda: job(cluster, first)[0] == "RUNNING", "nlp's first job to run")
    # 2 billing-minutes held by the running job's time limit + 2 for this one > 3: safe keeps it pending.
    second = submit(cluster, "bob", "-t", "2", "-n", "1", "--wrap", "true")
    wait_for(lambda: job(cluster, second) == ("PENDING", "AssocGrpBillingMinutes"), "nlp's second job to wait")
    wait_for(lambda: job(cluster, held) == ("PENDING", "AssocGrpBillingMinutes"), "vision's job to wait")
    assert job(cluster, first)[0] == "RUNNING"
    wait_for(lambda: job(cluster, first)[0] not in ("RUNNING", "COMPLETING"), "nlp's first job to end")
    assert job(cluster, first)[0] == "COMPLETED"
    wait_for(lambda: job(cluster, second)[0] == "COMPLETED", "nlp's second job to run once the first ended")
    assert job(cluster, held) == ("PENDING", "AssocGrpBillingMinutes")
    run(cluster, CONTROLLER, "scancel", held)


def test_an_accounts_usage_is_its_jobs_billing_times_their_run_time(cluster: LocalCluster) -> None:
    records = run(
        cluster,
        CONTROLLER,
        "sacct",
        "-a",
        "-n",
        "-X",
        "-P",
        "-A",
        "nlp",
        "-S",
        "2020-01-01",
        "-o",
        "alloctres,elapsedraw",
    )
    expected = 0
    for line in records.split():
        tres, elapsed = line.split("|")
        billing = int(dict(t.split("=", 1) for t in tres.split(","))["billing"])
        expected += billing * int(elapsed)
    assert expected > 0

    def raw_usage() -> float:
        out = run(cluster, CONTROLLER, "sshare", "-n", "-P", "-A", "nlp", "-o", "account,user,rawusage")
        return next(float(r.split("|")[2]) for r in out.split() if r.split("|")[:2] == ["nlp", ""])

    # Usage is added every PriorityCalcPeriod (1 minute with budgets); each job's run time is whole seconds.
    wait_for(lambda: abs(raw_usage() - expected) <= len(records.split()), f"nlp's usage to reach {expected}")


def test_rerunning_the_controller_bootstrap_changes_nothing(cluster: LocalCluster) -> None:
    code, output = cluster.bootstrap(CONTROLLER)
    assert code == 0, output
    assert '"changed": 0' in output.splitlines()[-1], output
    assert '"step": "slurm-teams"' in output


def test_an_admin_raises_a_used_up_budget_and_the_next_bootstrap_restores_the_config(cluster: LocalCluster) -> None:
    """docs/cost.md's override: raising the account's GrpTRESMins lets its waiting job start; the controller's next
    bootstrap puts the config's budget back (the config is the source of truth)."""
    waiting = submit(cluster, "alice", "-t", "1", "--wrap", "true")
    wait_for(lambda: job(cluster, waiting) == ("PENDING", "AssocGrpBillingMinutes"), "vision's job to wait")
    run(
        cluster,
        CONTROLLER,
        "sacctmgr",
        "-i",
        "modify",
        "account",
        "where",
        "name=vision",
        "set",
        "GrpTRESMins=billing=100",
    )
    wait_for(lambda: job(cluster, waiting)[0] == "COMPLETED", "vision's job to run once its limit is raised")
    code, output = cluster.bootstrap(CONTROLLER)
    assert code == 0, output
    assert "~ account vision (budget 0 per month (GrpTRESMins=billing=0))" in output
    rows = run(
        cluster,
        CONTROLLER,
        "sacctmgr",
        "-n",
        "-P",
        "show",
        "assoc",
        "where",
        "account=vision",
        "format=user,grptresmins",
    )
    assert "|billing=0" in rows.split()
