"""Who may publish to a cluster's alarm topic and use its key (security review L3): every service statement of the
topic policy and the key policy carries a condition; EventBridge may publish for this stack's own rules only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk import ClusterConfig, TrainingClusterStack
from hyperpod_cdk.constructs.alarm_topic import SNS_TOPIC_CONTEXT
from support import fast_app, template_of

WORKSPACE = "arn:aws:aps:us-west-2:111122223333:workspace/ws-12345678-abcd-1234-abcd-123456789012"
OWN_TOPICS = {
    "Fn::Join": [
        "",
        ["arn:", {"Ref": "AWS::Partition"}, ":sns:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}, ":*"],
    ]
}


def template(tmp_path: Path, **config: Any) -> dict[str, Any]:
    app = fast_app(outdir=str(tmp_path))
    return template_of(TrainingClusterStack(app, "s", config=ClusterConfig.model_validate(config)))


def one(template: dict[str, Any], kind: str) -> dict[str, Any]:
    (found,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]
    return found


def by_service(statements: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for statement in statements:
        services = statement.get("Principal", {}).get("Service", []) if statement["Effect"] == "Allow" else []
        for service in services if isinstance(services, list) else [services]:
            found.setdefault(service, []).append(statement)
    return found


@pytest.mark.parametrize("mode", ["api-driven", "continuous"])
def test_eventbridge_may_publish_for_this_stacks_rules_only(tmp_path: Path, mode: str) -> None:
    data = {"node_provisioning_mode": "continuous"} if mode == "continuous" else {}
    built = template(tmp_path, **data)
    rules = sorted(k for k, r in built["Resources"].items() if r["Type"] == "AWS::Events::Rule")
    assert len(rules) == (3 if mode == "continuous" else 2)
    statements = one(built, "AWS::SNS::TopicPolicy")["PolicyDocument"]["Statement"]
    [events] = by_service(statements)["events.amazonaws.com"]  # CDK's unconditioned grant is not there
    assert events["Action"] == "sns:Publish"
    [(operator, conditions)] = events["Condition"].items()
    assert operator == "ArnEquals" and list(conditions) == ["aws:SourceArn"]
    assert sorted(a["Fn::GetAtt"][0] for a in conditions["aws:SourceArn"]) == rules
    assert all(a == {"Fn::GetAtt": [a["Fn::GetAtt"][0], "Arn"]} for a in conditions["aws:SourceArn"])


def test_every_service_may_use_the_topic_key_only_under_a_condition(tmp_path: Path) -> None:
    built = template(tmp_path)
    key = one(built, "AWS::KMS::Key")["KeyPolicy"]["Statement"]
    services = by_service(key)
    assert set(services) == {"events.amazonaws.com", "cloudwatch.amazonaws.com", "aps.amazonaws.com"}
    assert all(len(found) == 1 and "Condition" in found[0] for found in services.values())
    [cloudwatch], [events], [aps] = (
        services[s] for s in ("cloudwatch.amazonaws.com", "events.amazonaws.com", "aps.amazonaws.com")
    )
    assert cloudwatch["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    # The SNS guide: aws:SourceAccount/aws:SourceArn in a key policy are not supported for EventBridge delivery.
    assert events["Condition"] == {"StringLike": {SNS_TOPIC_CONTEXT: OWN_TOPICS}}
    assert aps["Condition"] == {"StringLike": {SNS_TOPIC_CONTEXT: OWN_TOPICS}}
    for statement in (cloudwatch, events, aps):
        assert sorted(statement["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]


def test_prometheus_gets_the_key_only_with_a_workspace_that_alerts_to_the_topic(tmp_path: Path) -> None:
    built = template(tmp_path, observability={"workspace_arn": WORKSPACE})
    assert "aps.amazonaws.com" not in by_service(one(built, "AWS::KMS::Key")["KeyPolicy"]["Statement"])
    assert "aps.amazonaws.com" not in by_service(one(built, "AWS::SNS::TopicPolicy")["PolicyDocument"]["Statement"])
