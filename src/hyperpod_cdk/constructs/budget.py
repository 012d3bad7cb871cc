"""An AWS Budgets cost budget for the whole cluster, alerting the cluster's alarm topic: what Slurm cannot see
(idle nodes, storage, the controller) still has a cap that someone hears about.

How the cluster's charges are found: every resource of the stack carries the tag :data:`COST_TAG_KEY` = the
cluster's name, and the budget's cost filter selects that tag. HyperPod instances are SageMaker charges under the
usage type ``<REGION>-Cluster:ml.<type>`` (docs/cost.md); AWS states that a HyperPod cluster takes tags "in the
same way you add them in other AWS services" (AWS::SageMaker::Cluster, Tags), and that a tag filters cost only once
it is activated as a cost allocation tag in the Billing console ("Activating user-defined cost allocation tags",
AWS Billing User Guide); until then the budget sees nothing. The CloudFormation reference types ``CostFilters`` as
free JSON; the ``TagKeyValue`` value ``user:<key>$<value>`` is the form Budgets gives tag filters [inferred from the
Budgets console's and API's answers, not stated by the CloudFormation reference].

The topic policy is AWS's own for budget notifications ("Creating an Amazon SNS topic for budget notifications",
AWS Cost Management User Guide): ``budgets.amazonaws.com`` may ``SNS:Publish`` to this topic only, for this account
(``aws:SourceAccount``) and its budgets (``aws:SourceArn`` ``arn:<partition>:budgets::<account>:*``). The alarm topic
is encrypted with its own key, so Budgets gets ``kms:GenerateDataKey*`` and ``kms:Decrypt`` on it under the same
account condition.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack, Tags
from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from hyperpod_cdk.core.merged_values import COST_TAG_KEY

BUDGETS = "budgets.amazonaws.com"


def tag_filter(cluster_name: str) -> dict[str, list[str]]:
    return {"TagKeyValue": [f"user:{COST_TAG_KEY}${cluster_name}"]}


class ClusterBudget(Construct):
    """A monthly cost budget for the resources tagged with the cluster's name, notifying ``topic`` when actual
    spend passes each of ``alert_percent``.

    :param cluster_name: the cluster's name (the tag's value; the budget is named ``hyperpod-<cluster_name>``).
    :param monthly: the budget per calendar month in ``currency``.
    :param currency: the budget's unit. Default: USD.
    :param alert_percent: percentages of ``monthly``. Default: 80 and 100.
    :param topic: the cluster's alarm topic.
    :param topic_key: the topic's KMS key, given Budgets' use of it. Default: none (an unencrypted topic).
    :param tag_scope: the construct whose resources get the cost tag (the stack). Default: this construct's scope.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        monthly: float,
        topic: sns.ITopic,
        currency: str = "USD",
        alert_percent: Sequence[float] = (80.0, 100.0),
        topic_key: kms.IKey | None = None,
        tag_scope: Construct | None = None,
    ) -> None:
        super().__init__(scope, id)
        if monthly <= 0:
            raise ValueError(f"monthly: got {monthly!r}; a budget is more than zero")
        stack = Stack.of(self)
        Tags.of(tag_scope or scope).add(COST_TAG_KEY, cluster_name)
        own_budgets = f"arn:{stack.partition}:budgets::{stack.account}:*"
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="BudgetsPublish",
                principals=[iam.ServicePrincipal(BUDGETS)],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {"aws:SourceArn": own_budgets},
                },
            )
        )
        if topic_key is not None:
            topic_key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="BudgetsUseTopicKey",
                    principals=[iam.ServicePrincipal(BUDGETS)],
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    resources=["*"],
                    conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
                )
            )
        self.budget = budgets.CfnBudget(
            self,
            "Budget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=f"hyperpod-{cluster_name}",
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=monthly, unit=currency),
                cost_filters=tag_filter(cluster_name),
            ),
            notifications_with_subscribers=[
                budgets.CfnBudget.NotificationWithSubscribersProperty(
                    notification=budgets.CfnBudget.NotificationProperty(
                        notification_type="ACTUAL",
                        comparison_operator="GREATER_THAN",
                        threshold=percent,
                        threshold_type="PERCENTAGE",
                    ),
                    subscribers=[
                        budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=topic.topic_arn)
                    ],
                )
                for percent in alert_percent
            ],
        )
