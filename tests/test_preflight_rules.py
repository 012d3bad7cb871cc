"""Each preflight rule against a moto account: a real-looking account that breaks it, and a good one that passes.

The account is built in moto (tests/preflight_support.py); Service Quotas and training plans come from named fakes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from ops_support import ACCOUNT, REGION, aws_env, moto_url  # noqa: F401
from preflight_support import AZ, NOW, OTHER_AZ, AccountFakes, MotoAccount, fsx_extra, plan  # noqa: F401

from hyperpod_cdk.config import parse_model
from hyperpod_cdk.ops.context import make_session
from hyperpod_cdk.preflight.account import Account
from hyperpod_cdk.preflight.runner import run_online
from hyperpod_cdk.rules import ClusterView, all_rules
from training_runtime.problems import Problem

pytestmark = pytest.mark.usefixtures("aws_env")

P5 = "ml.p5.48xlarge"


@pytest.fixture
def acct() -> MotoAccount:
    return MotoAccount()


@pytest.fixture
def fakes() -> AccountFakes:
    return AccountFakes(quotas={f"{P5} for cluster usage": 8, "ml.m5.xlarge for cluster usage": 4})


def config(acct: MotoAccount, **changes: Any) -> dict[str, Any]:
    """An existing-network config: a controller and four p5 workers, no storage, no observability."""
    base: dict[str, Any] = {
        "cluster_name": "c1",
        "network": {"vpc_id": acct.vpc, "subnet_id": acct.subnet, "security_group_id": acct.sg, "availability_zone": AZ},
        "instance_groups": [
            {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
            {"name": "workers", "instance_type": P5, "count": 4},
        ],
        "storage": None,
        "observability": {"enabled": False},
    }
    base.update(changes)
    return base


def check(rule_id: str, data: dict[str, Any], fakes: AccountFakes) -> tuple[list[Problem], Account]:
    """The rule's problems, run alone on a fresh account (its calls are its own)."""
    session = make_session(None, None)
    fakes.install(session)
    account = Account(session, now=lambda: NOW.timestamp())
    view = ClusterView.of_config(parse_model(data), region=REGION)
    rule = next(r for r in all_rules() if r.id == rule_id)
    return run_online(view, account, [rule]), account


def only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


def test_smoke(acct: MotoAccount, fakes: AccountFakes) -> None:
    for rule in all_rules():
        if "aws" in rule.needs:
            found, account = check(rule.id, config(acct), fakes)
            print(rule.id, [str(p) for p in found], account.calls)
