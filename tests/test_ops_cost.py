"""`hyperpod-cdk cost` against a moto server: Slurm's accounting read on the controller through SSM (the session is
the named fake of tests/test_ops_status_slurm.py, ``ControllerSays``: moto has no ``sagemaker-cluster:`` SSM target
and no node to run sacct on), the window, the groupings, JSON and the table, and a controller that does not answer."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from clock import utc
from hyperpod_cdk.ops.parser import COST_GROUPINGS
from ops_support import Operator, aws_env, moto_url  # noqa: F401
from test_cost_report import PARTITIONS, SACCT, SSHARE
from test_ops_status_slurm import ControllerSays, gpu_cluster
from training_runtime.cost_report import GROUPINGS

pytestmark = pytest.mark.usefixtures("aws_env")
ANSWER = [
    "### sacct",
    *SACCT.splitlines(),
    "### partitions",
    *PARTITIONS.splitlines(),
    "### sshare",
    *SSHARE.splitlines(),
]
WINDOW = ("--since", "2026-11-20T10:00", "--until", "2026-11-20T12:00")
"""Given in full, so no clock decides it: the window of the fixture's accounting (tests/test_cost_report.py)."""


def test_cost_reads_slurm_accounting_on_the_controller_and_prices_it() -> None:
    cluster = gpu_cluster()
    controller = cluster.ids["controller"][0]
    operator = Operator(ssm_command=ControllerSays(ANSWER))
    result = operator("cost", "gpu", *WINDOW, "--json", "--region", "us-west-2")
    assert result.code == 0, result.err
    (argv,) = operator.captured
    assert argv[:7] == [
        "aws",
        "ssm",
        "start-session",
        "--target",
        f"sagemaker-cluster:{cluster.id}_controller-{controller}",
        "--document-name",
        "AWS-StartNonInteractiveCommand",
    ]
    (command,) = json.loads(argv[8])["command"]
    assert (
        "sacct -a -X -P -n --format=JobID,User,Account,Partition,Start,End,ElapsedRaw,AllocTRES,NNodes,State" in command
    )
    assert "-S 2026-11-20T10:00:00 -E 2026-11-20T12:00:00" in command
    assert (
        "scontrol -o show partition" in command and "sshare -a -P -n -o Account,User,GrpTRESMins,GrpTRESRaw" in command
    )
    report = result.json()
    assert report["spend"] == 293.76 and report["idle_cost"] == 97.92
    assert [(x["key"], x["spend"]) for x in report["lines"]] == [("ml", 244.8), ("vision", 48.96)]
    assert report["budgets"][0]["left"] == pytest.approx(255.2)


def test_the_table_groups_by_user_and_shows_idle_cost_and_budgets() -> None:
    gpu_cluster()
    result = Operator(ssm_command=ControllerSays(ANSWER))(
        "cost", "gpu", *WINDOW, "--by", "user", "--region", "us-west-2"
    )
    assert result.code == 0, result.err
    assert "Spend by user" in result.out and "alice" in result.out and "195.84" in result.out
    assert "97.92" in result.out and "255.20" in result.out
    # The budget's limit and usage in money: 500 and 244.80, whatever the billing unit.
    budget = next(line for line in result.out.splitlines() if "│ ml " in line)
    assert "500.00" in budget and "244.80" in budget, result.out
    assert "dev partition" in result.out


def test_a_controller_that_does_not_answer_is_an_error_with_the_reason() -> None:
    gpu_cluster()
    says = ControllerSays([], code=255, stderr="SessionManagerPlugin is not found")
    result = Operator(ssm_command=says)("cost", "gpu", "--region", "us-west-2")
    assert result.code == 1
    assert "did not return Slurm's accounting: SessionManagerPlugin is not found" in result.err


def test_a_bad_window_is_a_usage_error() -> None:
    gpu_cluster()
    result = Operator()("cost", "gpu", "--since", "yesterday-ish", "--region", "us-west-2")
    assert result.code == 2 and "--since 'yesterday-ish': give an ISO date or time" in result.err
    result = Operator()("cost", "gpu", *WINDOW[2:], "--since", "2026-11-21", "--region", "us-west-2")
    assert result.code == 2 and "is not after --since" in result.err


@pytest.mark.calendar
@pytest.mark.parametrize(
    ("now", "since", "until"),
    [
        (None, None, None),  # the run's clock, whatever the date (make test-calendar moves it)
        (datetime(2027, 1, 31, 23, 59, 59, tzinfo=UTC), "2027-01-01T00:00:00", "2027-01-31T23:59:59"),
        (datetime(2028, 1, 1, 0, 0, 0, tzinfo=UTC), "2028-01-01T00:00:00", "2028-01-01T00:00:01"),
        (datetime(2028, 2, 29, 12, 0, 0, tzinfo=UTC), "2028-02-01T00:00:00", "2028-02-29T12:00:00"),
    ],
)
def test_the_default_window_is_this_month_so_far(now: datetime | None, since: str | None, until: str | None) -> None:
    gpu_cluster()
    clock = now or utc()
    if since is None or until is None:
        since = clock.replace(day=1, hour=0, minute=0, second=0).strftime("%Y-%m-%dT%H:%M:%S")
        until = max(clock, clock.replace(day=1, hour=0, minute=0, second=1)).strftime("%Y-%m-%dT%H:%M:%S")
    operator = Operator(ssm_command=ControllerSays(ANSWER), now=clock.timestamp())
    result = operator("cost", "gpu", "--json", "--region", "us-west-2")
    assert result.code == 0, result.err
    (command,) = json.loads(operator.captured[0][8])["command"]
    assert f"-S {since} -E {until}" in command


def test_the_parser_offers_the_reports_groupings() -> None:
    assert COST_GROUPINGS == GROUPINGS
