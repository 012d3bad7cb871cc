"""`cost` at synth: the AWS budget (tag filter, notifications to the alarm topic, Budgets' topic and key policy,
the cost tag on the stack's resources), cdk-nag and the strict validator clean; and the prices in the nodes'
parameters file with their sources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from hyperpod_cdk import ClusterConfig, TrainingClusterStack
from hyperpod_cdk.constructs.budget import COST_TAG_KEY
from hyperpod_cdk.core.deployment import deployment
from support import STRICT_VALIDATION, assert_nag_clean, fast_app, template_of

PRICED = {t: {"per_hour": 2.5, "source": "savings plan SP-1"} for t in ("ml.m5.xlarge", "ml.trn1.32xlarge")}
BUDGET = {
    "cluster_name": "costly",
    "cost": {"prices": PRICED, "aws_budget": {"monthly": 50000, "alert_percent": [80, 100]}},
}


def of_type(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == kind]


def test_the_budget_filters_the_clusters_tag_and_alerts_the_alarm_topic() -> None:
    stack = TrainingClusterStack(fast_app(), "s", config=ClusterConfig.model_validate(BUDGET))
    template = template_of(stack)
    (budget,) = of_type(template, "AWS::Budgets::Budget")
    data = budget["Properties"]["Budget"]
    assert data["BudgetType"] == "COST" and data["TimeUnit"] == "MONTHLY"
    assert data["BudgetLimit"] == {"Amount": 50000, "Unit": "USD"}
    assert data["CostFilters"] == {"TagKeyValue": [f"user:{COST_TAG_KEY}$costly"]}
    notes = budget["Properties"]["NotificationsWithSubscribers"]
    assert [n["Notification"]["Threshold"] for n in notes] == [80, 100]
    assert {n["Notification"]["NotificationType"] for n in notes} == {"ACTUAL"}
    (topic_id,) = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::SNS::Topic"]
    assert all(n["Subscribers"] == [{"SubscriptionType": "SNS", "Address": {"Ref": topic_id}}] for n in notes)
    # the cost tag is on the cluster (and every taggable resource)
    (cluster,) = of_type(template, "AWS::SageMaker::Cluster")
    assert {"Key": COST_TAG_KEY, "Value": "costly"} in cluster["Properties"]["Tags"]


def statements(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    found = []
    for resource in of_type(template, kind):
        doc = resource["Properties"].get("PolicyDocument") or resource["Properties"].get("KeyPolicy")
        found += doc["Statement"]
    return found


def test_budgets_may_publish_to_the_topic_and_use_its_key_for_this_account_only() -> None:
    template = template_of(TrainingClusterStack(fast_app(), "s", config=ClusterConfig.model_validate(BUDGET)))
    (publish,) = [s for s in statements(template, "AWS::SNS::TopicPolicy") if s.get("Sid") == "BudgetsPublish"]
    assert publish["Principal"] == {"Service": "budgets.amazonaws.com"} and publish["Action"] == "sns:Publish"
    assert publish["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert "budgets::" in json.dumps(publish["Condition"]["ArnLike"]["aws:SourceArn"])
    (key,) = [s for s in statements(template, "AWS::KMS::Key") if s.get("Sid") == "BudgetsUseTopicKey"]
    assert key["Principal"] == {"Service": "budgets.amazonaws.com"}
    assert key["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


def test_no_budget_no_budget_resource_and_no_cost_tag() -> None:
    template = template_of(
        TrainingClusterStack(fast_app(), "s", config=ClusterConfig.model_validate({"cost": {"prices": PRICED}}))
    )
    assert of_type(template, "AWS::Budgets::Budget") == []
    assert COST_TAG_KEY not in json.dumps(template)


def test_the_nodes_get_each_price_with_its_source() -> None:
    config = ClusterConfig.model_validate({"cost": {"prices": {"ml.trn1.32xlarge": PRICED["ml.trn1.32xlarge"]}}})
    prices = deployment(config, region="us-east-1").parameters.to_json()["hyperpod_cdk"]["prices"]
    assert prices == {"ml.trn1.32xlarge": {"per_hour": 2.5, "source": "config: savings plan SP-1"}}
    assert "prices" not in deployment(ClusterConfig()).parameters.to_json()["hyperpod_cdk"]
    flexible = ClusterConfig.model_validate(
        {
            "cost": {},
            "instance_groups": [
                {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
                {"name": "g5", "instance_types": ["ml.g5.8xlarge", "ml.g5.12xlarge"], "count": 1},
            ],
        }
    )
    found = deployment(flexible, region="us-east-1").parameters.prices
    assert {t: p.source for t, p in found.items()} == {"ml.g5.8xlarge": "snapshot 2026-11-29"}


@pytest.mark.compliance
def test_a_cluster_with_an_aws_budget_passes_nag_and_the_strict_validator(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path), context=STRICT_VALIDATION)
    TrainingClusterStack(app, "budgeted", config=ClusterConfig.model_validate({**BUDGET, "storage": None}))
    assert_nag_clean(app, tmp_path)


def test_synth_lists_each_price_and_its_source() -> None:
    stack = TrainingClusterStack(fast_app(), "s", config=ClusterConfig.model_validate(BUDGET))
    infos = cdk.assertions.Annotations.from_stack(stack).find_info("*", cdk.assertions.Match.string_like_regexp(".*"))
    text = " ".join(str(i.entry.data) for i in infos)
    assert "ml.trn1.32xlarge 2.5 USD/h (config: savings plan SP-1)" in text
