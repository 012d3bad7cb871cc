"""A cluster's alarm topic and who may publish to it: its own KMS key, TLS only, and one statement per publishing
service in the topic policy and in the key policy, each conditioned as narrowly as that service's requests allow.

* CloudWatch alarms: this account's alarms (``aws:SourceArn`` ``alarm:*``, ``aws:SourceAccount``) in the topic
  policy; ``aws:SourceAccount`` in the key policy.
* EventBridge: the stack's own rules (``aws:SourceArn`` = each rule's ARN) in the topic policy. The EventBridge user
  guide ("Cross-service confused deputy prevention"): "We recommend using the aws:SourceArn and aws:SourceAccount
  global condition context keys in resource policies [...] For EventBridge event bus rule targets, the value of
  aws:SourceArn must be the rule ARN." In the key policy no source key can be used: the SNS developer guide, "Adding
  the aws:SourceAccount and aws:SourceArn to a AWS KMS policy is not supported for EventBridge-to-encrypted topics"
  (quoted in awslabs/landing-zone-accelerator-on-aws#407, where such a condition stopped delivery), so that statement
  is bound by the encryption context SNS sends (``kms:EncryptionContext:aws:sns:topicArn``) to this account's topics
  in this Region.
* Amazon Managed Service for Prometheus (a new workspace only): that workspace (``aws:SourceArn``) and this account,
  as the Prometheus user guide's topic policy has them; the encryption-context bound in the key policy.

The key policy cannot name the topic itself (the topic refers to the key) nor the workspace (its alert manager
names the topic); the topic policy names both.
"""

from __future__ import annotations

from collections.abc import Sequence

import jsii
from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk.interfaces import aws_events as events_refs
from constructs import Construct, IConstruct

EVENTS = "events.amazonaws.com"
CLOUDWATCH = "cloudwatch.amazonaws.com"
PROMETHEUS = "aps.amazonaws.com"
TOPIC_KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey*")
"""What a service that publishes to an encrypted topic needs of its key (SNS developer guide, "Enable compatibility
between event sources from AWS services and encrypted topics": ``kms:GenerateDataKey*`` and ``kms:Decrypt``)."""
SNS_TOPIC_CONTEXT = "kms:EncryptionContext:aws:sns:topicArn"
"""The encryption context SNS sends with a topic's data-key requests; AWS's GameLift guide conditions a service
principal's use of a topic key on it ("Set up an SNS topic with server-side encryption")."""


def alarm_topic(scope: Construct, cluster_name: str, emails: Sequence[str]) -> tuple[sns.Topic, kms.Key]:
    """The alarm topic (``AlarmTopic``) and its key (``AlarmTopicKey``): CloudWatch alarms and EventBridge may use
    the key; CloudWatch alarms of this account may publish (EventBridge's rules: :func:`let_rules_publish`)."""
    key = kms.Key(
        scope,
        "AlarmTopicKey",
        description=f"Alarm topic of HyperPod cluster {cluster_name}",
        enable_key_rotation=True,
        removal_policy=RemovalPolicy.DESTROY,
    )
    stack = Stack.of(scope)
    key_statement(key, "CloudWatchAlarmsUseKey", CLOUDWATCH, {"StringEquals": {"aws:SourceAccount": stack.account}})
    key_statement(key, "EventBridgeRulesUseKey", EVENTS, own_topics(stack))
    topic = sns.Topic(
        scope, "AlarmTopic", display_name=f"HyperPod {cluster_name} alarms", master_key=key, enforce_ssl=True
    )
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchAlarmsPublish",
            principals=[iam.ServicePrincipal(CLOUDWATCH)],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions={
                "ArnLike": {"aws:SourceArn": stack.format_arn(service="cloudwatch", resource="alarm:*")},
                "StringEquals": {"aws:SourceAccount": stack.account},
            },
        )
    )
    for email in emails:
        topic.add_subscription(subscriptions.EmailSubscription(email))
    return topic, key


def own_topics(stack: Stack) -> dict[str, dict[str, str]]:
    """The key serves this account's SNS topics in this Region only (SNS's encryption context)."""
    return {"StringLike": {SNS_TOPIC_CONTEXT: stack.format_arn(service="sns", resource="*")}}


def key_statement(key: kms.Key, sid: str, service: str, conditions: dict[str, dict[str, str]]) -> None:
    """``service`` may use ``key`` for a topic it publishes to, under ``conditions``."""
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid=sid,
            principals=[iam.ServicePrincipal(service)],
            actions=list(TOPIC_KEY_ACTIONS),
            resources=["*"],
            conditions=conditions,
        )
    )


def let_rules_publish(topic: sns.Topic, rule_arns: Sequence[str]) -> None:
    """EventBridge publishes to the topic for these rules only (a rule's ARN holds its account; IAM: "The source's
    ARN includes the account ID, so it is not necessary to use aws:SourceAccount with aws:SourceArn")."""
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            sid="EventBridgeRulesPublish",
            principals=[iam.ServicePrincipal(EVENTS)],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions={"ArnEquals": {"aws:SourceArn": list(rule_arns)}},
        )
    )


def let_prometheus_publish(topic: sns.Topic, key: kms.Key, workspace_arn: str) -> None:
    """The workspace's alert manager publishes to the topic as the Prometheus service, for this workspace only, and
    uses the key for this account's topics."""
    stack = Stack.of(topic)
    key_statement(key, "PrometheusAlertsUseKey", PROMETHEUS, own_topics(stack))
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            sid="PrometheusAlertsPublish",
            principals=[iam.ServicePrincipal(PROMETHEUS)],
            actions=["sns:Publish", "sns:GetTopicAttributes"],
            resources=[topic.topic_arn],
            conditions={
                "ArnEquals": {"aws:SourceArn": workspace_arn},
                "StringEquals": {"aws:SourceAccount": stack.account},
            },
        )
    )


@jsii.implements(events.IRuleTarget)
class PublishToTopic:
    """An EventBridge rule's target: the alarm topic. Unlike ``aws_events_targets.SnsTopic`` it grants nothing (that
    target adds ``events.amazonaws.com`` to the topic policy and to the key policy with no condition);
    :func:`let_rules_publish` writes the grant, conditioned on the rules' ARNs."""

    def __init__(self, topic: sns.ITopic) -> None:
        self._topic = topic

    def bind(self, rule: events_refs.IRuleRef, id: str | None = None) -> events.RuleTargetConfig:
        target: IConstruct = self._topic
        return events.RuleTargetConfig(arn=self._topic.topic_arn, target_resource=target)
