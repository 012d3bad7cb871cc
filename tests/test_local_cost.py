"""Teams, budgets and prices on a local cluster (issue #32): two teams as Slurm accounts, one whose budget is used
up. Its new job waits with Slurm's reason while the other team's job runs; a running job is never killed at the limit;
an account's usage equals the figure computed by hand from sacct; re-running the controller's bootstrap changes
nothing; ``hyperpod-cdk cost`` reads the cluster through the emulated control plane and SSM and prices the module's
jobs at the configured rate. One cluster for the module (HyperPod platform, emulated control plane)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from hyperpod_local import LocalCluster
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.overlay import host_hardware
from hyperpod_local.plan import UpOptions
from local_support import CPU_CLUSTER, SsmOnTheNode, release, requires_hyperpod_platform, use_control_plane, variant
from ops_support import NoFakes, Operator
from training_runtime.billing import billing_minutes, money, node_billing_per_minute
from training_runtime.node import HYPERPOD

pytestmark = [requires_hyperpod_platform, pytest.mark.slow]

CONTROLLER, LOGIN = "controller-machine-1", "login-group-1"
NAME = "cpu-cluster"
PARTITION, WORKER = "cpu", "ml.c5.4xlarge"
"""The priced partition and its instance type (examples/cpu-cluster.yaml)."""
WORKER_CPUS = host_hardware()["cpus"]
"""Its CPUs in Slurm: the emulator sizes every instance type as this machine (hyperpod_local.overlay)."""
PRICE = 0.64515 * WORKER_CPUS
"""The test rate per instance-hour: a CPU billing weight of 1075.25 at 1/100,000 of the currency per billing-minute
(price x units / 60 / CPUs; 10.7525 at 1/1000), not a whole number, so the tests meet Slurm's rounding of a job's
billing."""
CPU_WEIGHT = node_billing_per_minute(PRICE) / WORKER_CPUS
NLP_BUDGET = money(round(3 * CPU_WEIGHT))
"""About 3 CPU-minutes' billing: one 1-CPU job with a 2-minute limit fits, a second one beside it does not."""
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
    "cost": {"prices": {WORKER: {"per_hour": PRICE, "source": "test rate"}}},
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
        variant(platform=HYPERPOD),
        UpOptions(prefix=f"hpco{os.getpid() % 10000}", subnet="10.236.0.0/24"),
    )
    print(f"local cluster up in {time.monotonic() - started:.0f} s")
    try:
        control_plane.start(cluster)
        yield cluster
    finally:
        cluster.down()


def run(cluster: LocalCluster, node: str, *argv: str) -> str:
    result = cluster.exec(node, list(argv), timeout=120)
    assert result.returncode == 0, f"{node}: {' '.join(argv)}\n{result.stdout}{result.stderr}"
    return result.stdout


def submit(cluster: LocalCluster, user: str, *options: str) -> str:
    """A job in the priced partition: HyperPod's default partition, dev, has no billing weights (docs/cost.md)."""
    argv = ["sbatch", "--parsable", "-p", PARTITION, "-o", "/dev/null", *options]
    return run(cluster, LOGIN, "runuser", "-u", user, "--", *argv).strip()


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
    with release(cluster, "cost-release") as ending:  # nlp's first job runs until the test has looked
        first = submit(cluster, "bob", "-t", "2", "-n", "1", "--wrap", ending.wait)
        wait_for(lambda: job(cluster, first)[0] == "RUNNING", "nlp's first job to run")
        # 2 minutes' billing held by the running job's time limit + 2 for this one > the budget's 3: safe keeps it
        # pending.
        second = submit(cluster, "bob", "-t", "2", "-n", "1", "--wrap", "true")
        wait_for(lambda: job(cluster, second) == ("PENDING", "AssocGrpBillingMinutes"), "nlp's second job to wait")
        wait_for(lambda: job(cluster, held) == ("PENDING", "AssocGrpBillingMinutes"), "vision's job to wait")
        assert job(cluster, first)[0] == "RUNNING"
    wait_for(lambda: job(cluster, first)[0] not in ("RUNNING", "COMPLETING"), "nlp's first job to end")
    assert job(cluster, first)[0] == "COMPLETED"
    wait_for(lambda: job(cluster, second)[0] == "COMPLETED", "nlp's second job to run once the first ended")
    assert job(cluster, held) == ("PENDING", "AssocGrpBillingMinutes")
    run(cluster, CONTROLLER, "scancel", held)


def test_an_accounts_usage_is_its_jobs_weighted_cpus_times_their_run_time(cluster: LocalCluster) -> None:
    """What Slurm 24.11 does with a weight that is not a whole number: sacct's billing is the weighted CPUs rounded
    down (1075 for 1 CPU at 1075.25), while the association's raw usage (fair share) accrues the exact product."""
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
        "2020-01-01",  # before every job of the run (sacct's default start is today's midnight, which a run can cross)
        "-o",
        "alloctres,elapsedraw",
    )
    expected = one_second = 0.0
    for line in records.split():
        tres, elapsed = line.split("|")
        allocated = dict(t.split("=", 1) for t in tres.split(","))
        cpus = int(allocated["cpu"])
        assert int(allocated["billing"]) == int(cpus * CPU_WEIGHT), line
        expected += cpus * CPU_WEIGHT * int(elapsed)
        one_second += cpus * CPU_WEIGHT
    assert expected > 0

    def raw_usage() -> float:
        out = run(cluster, CONTROLLER, "sshare", "-n", "-P", "-A", "nlp", "-o", "account,user,rawusage")
        return next(float(r.split("|")[2]) for r in out.split() if r.split("|")[:2] == ["nlp", ""])

    # Usage is added every PriorityCalcPeriod (1 minute with budgets); each job's run time is whole seconds.
    wait_for(lambda: abs(raw_usage() - expected) <= one_second, f"nlp's usage to reach {expected}")


def test_rerunning_the_controller_bootstrap_changes_nothing(cluster: LocalCluster) -> None:
    code, output = cluster.bootstrap(CONTROLLER)
    assert code == 0, output
    assert '"changed": 0' in output.splitlines()[-1], output
    assert '"step": "slurm-teams"' in output


def test_an_admin_raises_a_used_up_budget_and_the_next_bootstrap_restores_the_config(cluster: LocalCluster) -> None:
    """docs/cost.md's override: raising the account's GrpTRESMins lets its waiting job start; the controller's next
    bootstrap puts the config's budget back (the config is the source of truth)."""
    waiting = submit(cluster, "alice", "-t", "1", "--wrap", "sleep 3")  # vision's spend in the cost report
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
        f"GrpTRESMins=billing={billing_minutes(0.1)}",
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


@pytest.fixture
def operator(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Operator:
    """``hyperpod-cdk`` in-process against the emulated control plane, its SSM sessions run on the nodes."""
    use_control_plane(cluster, monkeypatch, tmp_path)
    sagemaker = boto3.session.Session().client("sagemaker")
    return Operator(fakes=NoFakes(), ssm_command=SsmOnTheNode(cluster, sagemaker, NAME))


def test_the_cost_report_prices_the_modules_jobs_at_the_configured_rate(
    cluster: LocalCluster, operator: Operator
) -> None:
    """After the jobs above: each account's spend is its jobs' CPUs x run time x the configured price per CPU-hour;
    the budgets left are the limits less Slurm's usage; idle cost is not negative; every job that ran is listed.
    Allowed difference per job: sacct's billing is a whole number (1075 for a 1-CPU job at a weight of 1075.25), so
    up to one billing unit per minute it ran, plus the JSON's rounding to 4 decimals."""
    records = run(
        cluster,
        CONTROLLER,
        "sacct",
        "-a",
        "-n",
        "-X",
        "-P",
        "-S",
        "2020-01-01",  # before every job of the run (sacct's default start is today's midnight, which a run can cross)
        "-o",
        "jobid,account,alloccpus,elapsedraw,start",
    )
    expected: dict[str, float] = {}
    allowed: dict[str, float] = {}
    ran: set[str] = set()
    first = datetime.now(UTC).replace(tzinfo=None)
    for line in records.split():
        job_id, account, cpus, elapsed, start = line.split("|")
        if start in ("Unknown", "None", "") or int(elapsed) == 0:
            continue  # never ran, or for no time: the report leaves it out
        ran.add(job_id)
        first = min(first, datetime.fromisoformat(start))
        expected[account] = expected.get(account, 0.0) + int(cpus) * int(elapsed) / 3600 * PRICE / WORKER_CPUS
        allowed[account] = allowed.get(account, 0.0) + money(int(elapsed) / 60) + 0.00005
    assert set(expected) == {"nlp", "vision"} and expected["nlp"] > 0, records
    since = (first - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S")
    until = (datetime.now(UTC) + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S")

    by_account = operator("cost", NAME, "--since", since, "--until", until, "--json", "--by", "account")
    assert by_account.code == 0, by_account.err
    report: dict[str, Any] = by_account.json()
    spend = {x["key"]: x["spend"] for x in report["lines"]}
    assert set(spend) == set(expected), report
    print(f"cost report: spend {spend}, by hand {expected}, idle {report['idle_cost']}, budgets {report['budgets']}")
    for account, figure in expected.items():
        assert abs(spend[account] - figure) <= allowed[account], (account, spend[account], figure, report)
    assert report["unpriced_jobs"] == 0 and report["notes"] == [], report
    assert report["idle_cost"] >= 0 and [i["partition"] for i in report["idle"]] == ["cpu"], report
    budgets = {b["account"]: b for b in report["budgets"]}
    assert budgets["nlp"]["limit"] == NLP_BUDGET and budgets["vision"]["limit"] == 0, report
    assert budgets["nlp"]["used"] > 0 and budgets["nlp"]["left"] == pytest.approx(
        max(0.0, NLP_BUDGET - budgets["nlp"]["used"])
    )
    assert budgets["vision"]["left"] == 0, report
    # GrpTRESRaw counts whole billing-minutes of the jobs' billing: within a minute's billing of the spend.
    assert abs(budgets["nlp"]["used"] - spend["nlp"]) <= money(1.1) * len(ran) + 0.00005, report

    by_job = operator("cost", NAME, "--since", since, "--until", until, "--json", "--by", "job").json()
    assert {x["key"] for x in by_job["lines"]} == ran, by_job
    text = operator("cost", NAME, "--since", since, "--until", until)
    assert text.code == 0, text.err
    assert "Spend by account" in text.out and "nlp" in text.out and "vision" in text.out, text.out
