"""ClusterObservability: where the nodes' metrics go and what watches the cluster.

An Amazon Managed Service for Prometheus workspace (new, or an existing one by ARN) that the nodes remote-write
to, optional Amazon Managed Grafana reading it, and the alarms a platform team expects, all sent to one SNS
topic (KMS-encrypted, TLS only): HyperPod's EventBridge events (cluster failed, node health, and cluster errors
for clusters with continuous provisioning, the only ones that have cluster events), CloudWatch alarms on failed
lifecycle runs and on the health-monitoring agent's detections in the cluster's log group (on Slurm the agent's
GPU faults do not arrive as EventBridge events), and Prometheus alert rules (exporter down, no metrics, Slurm
node drained or down). docs/observability.md says what each one watches and why.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, Fn, Stack
from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_events as events
from aws_cdk import aws_grafana as grafana
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from hyperpod_cdk.constructs.alarm_topic import (
    PublishToTopic,
    alarm_topic,
    let_prometheus_publish,
    let_rules_publish,
)
from hyperpod_cdk.constructs.alert_rules import (
    HEALTH_AGENT_DETECTION_PATTERN,
    LIFECYCLE_FAILURE_PATTERN,
    alertmanager_yaml,
    rule_groups_yaml,
)
from hyperpod_cdk.constructs.checks import check_props
from hyperpod_cdk.constructs.cluster import HyperPodCluster
from hyperpod_cdk.constructs.hyperpod_events import CLUSTER_EVENT, CLUSTER_STATE_CHANGE, EVENT_SOURCE, NODE_HEALTH_EVENT
from hyperpod_cdk.core.errors import raise_if_any
from hyperpod_cdk.model import NodeProvisioningMode, cluster_log_group
from hyperpod_cdk.rules.observability import WORKSPACE_ARN
from training_runtime.params import MetricsTarget

REMOTE_WRITE_ACTIONS = ("aps:RemoteWrite",)
"""What a node's metrics agent needs on the workspace (nothing else: it only pushes samples)."""
QUERY_ACTIONS = ("aps:QueryMetrics", "aps:GetSeries", "aps:GetLabels", "aps:GetMetricMetadata")
"""What Grafana needs to read the workspace (the Prometheus query API)."""
FAILED_CLUSTER_STATES = ("Failed", "RollingBack")
LIFECYCLE_METRIC = "LifecycleScriptFailures"
HEALTH_AGENT_METRIC = "HealthAgentDetections"
METRIC_NAMESPACE = "hyperpod-cdk"


def endpoint_of(arn: str) -> tuple[str, str, str]:
    """(Region, workspace ID, Prometheus endpoint ending in '/') of a workspace ARN (rules.observability checks it)."""
    match = WORKSPACE_ARN.fullmatch(arn)
    assert match is not None, arn  # OBS-WORKSPACE-ARN ran before
    suffix = "amazonaws.com.cn" if match["partition"] == "aws-cn" else "amazonaws.com"
    return match["region"], match["id"], f"https://aps-workspaces.{match['region']}.{suffix}/workspaces/{match['id']}/"


class ClusterObservability(Construct):
    """A cluster's metrics destination and alarms. Create it before the cluster (the nodes' parameters need
    :attr:`metrics_target`), then call :meth:`watch` with the cluster.

    :param cluster_name: the name the nodes label every series with (``cluster``; the Slurm cluster name).
    :param metrics: whether the nodes ship metrics at all. False: no workspace, no Grafana, no alert rules
        (the alarm topic, event rules and CloudWatch alarms remain). Default: True.
    :param workspace_arn: an existing Prometheus workspace. Default: a new one, encrypted with the organization's
        key when ``OrganizationRules`` has one (an aspect sets it).
    :param grafana: an Amazon Managed Grafana workspace (IAM Identity Center sign-in) reading the workspace.
        Default: False.
    :param alarms: the alarm topic, event rules, CloudWatch alarm and alert rules. Default: True.
    :param emails: addresses subscribed to the alarm topic. Default: none.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        metrics: bool = True,
        workspace_arn: str | None = None,
        grafana: bool = False,
        alarms: bool = True,
        emails: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, id)
        from hyperpod_cdk.core.config import AlarmsConfig, ObservabilityConfig

        check_props(
            self,
            "ClusterObservability",
            {"observability"},
            observability=ObservabilityConfig(
                enabled=metrics or alarms,
                workspace_arn=workspace_arn,
                grafana=grafana,
                alarms=AlarmsConfig(enabled=alarms, emails=list(emails)),
            ),
            paths={"observability": ""},
        )
        if grafana and not metrics:
            raise_if_any(
                f"ClusterObservability {self.node.path}",
                ["grafana: needs metrics (a workspace to read). Fix: set metrics=True, or grafana=False"],
            )
        self.cluster_name = cluster_name
        stack = Stack.of(self)
        self.workspace: aps.CfnWorkspace | None = None
        self.workspace_arn: str | None = None
        self.workspace_id: str | None = None
        self.endpoint: str | None = None
        self.region: str | None = None
        self.topic: sns.Topic | None = None
        self.topic_key: kms.Key | None = None
        """The alarm topic's key: services that publish (Budgets, ``ClusterBudget``) need its use."""
        if alarms:
            self.topic, self.topic_key = alarm_topic(self, cluster_name, emails)
        if metrics and workspace_arn is not None:
            self.workspace_arn = workspace_arn
            self.region, self.workspace_id, self.endpoint = endpoint_of(workspace_arn)
        elif metrics:
            self.workspace = aps.CfnWorkspace(
                self,
                "Workspace",
                alias=cluster_name,
                alert_manager_definition=alertmanager_yaml(self.topic.topic_arn, stack.region) if self.topic else None,
            )
            self.workspace_arn = self.workspace.attr_arn
            self.workspace_id = self.workspace.attr_workspace_id
            self.endpoint = self.workspace.attr_prometheus_endpoint
            self.region = stack.region
        if self.workspace_arn is not None and alarms:
            # In an existing workspace the rules' alerts go to that workspace's own alert manager.
            aps.CfnRuleGroupsNamespace(
                self, "AlertRules", name=cluster_name, workspace=self.workspace_arn, data=rule_groups_yaml(cluster_name)
            )
            if self.workspace is not None and self.topic is not None:
                assert self.topic_key is not None
                let_prometheus_publish(self.topic, self.topic_key, self.workspace_arn)
        self.grafana = self._grafana() if grafana and self.workspace_arn is not None else None

    @property
    def metrics_target(self) -> MetricsTarget | None:
        """``hyperpod_cdk.metrics`` of the nodes' parameters file; None when there is no workspace."""
        if self.endpoint is None or self.region is None:
            return None
        return MetricsTarget(remote_write_url=f"{self.endpoint}api/v1/remote_write", region=self.region)

    @property
    def query_url(self) -> str | None:
        return f"{self.endpoint}api/v1/query" if self.endpoint else None

    def grant_remote_write(self, grantee: iam.IGrantable) -> iam.Grant | None:
        """``aps:RemoteWrite`` on this workspace, nothing more; None when there is no workspace."""
        if self.workspace_arn is None:
            return None
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=list(REMOTE_WRITE_ACTIONS), resource_arns=[self.workspace_arn]
        )

    def watch(self, cluster: HyperPodCluster) -> None:
        """Let the cluster's nodes write metrics, and alarm on its events, failed lifecycle runs and the health
        agent's detections.

        Every event rule matches ``resources: [<the cluster's ARN>]`` from ``Fn::GetAtt ClusterArn`` (the events
        carry the cluster's ARN there; AWS docs "Events that Amazon SageMaker AI sends to Amazon EventBridge" and
        the cluster events reference). The cluster-event rule exists only for a cluster with continuous node
        provisioning: "Cluster events are available for HyperPod clusters with NodeProvisioningMode set to
        Continuous" (sagemaker-hyperpod-cluster-events-reference).
        """
        for role in cluster.node_roles:  # every node runs the metrics agent (runtime steps/observability.py)
            self.grant_remote_write(role)
        if self.topic is None:
            return
        rules = {
            "ClusterFailedRule": (
                "the cluster failed or is rolling back",
                events.EventPattern(
                    detail_type=[CLUSTER_STATE_CHANGE], detail={"ClusterStatus": list(FAILED_CLUSTER_STATES)}
                ),
            ),
            "NodeHealthRule": (
                "HyperPod's health monitoring reports a node's health",
                events.EventPattern(detail_type=[NODE_HEALTH_EVENT]),
            ),
        }
        if cluster.resource.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS.cfn:
            rules["ClusterErrorRule"] = (
                "HyperPod reports an error (e.g. an instance could not be created; continuous provisioning)",
                events.EventPattern(detail_type=[CLUSTER_EVENT], detail={"EventDetails": {"EventLevel": ["Error"]}}),
            )
        rule_arns: list[str] = []
        for rule_id, (what, pattern) in rules.items():
            rule = events.Rule(
                self,
                rule_id,
                description=f"HyperPod cluster {self.cluster_name}: {what}",
                event_pattern=events.EventPattern(
                    source=[EVENT_SOURCE],
                    resources=[cluster.cluster_arn],
                    detail_type=pattern.detail_type,
                    detail=pattern.detail,
                ),
                targets=[PublishToTopic(self.topic)],
            )
            rule_arns.append(rule.rule_arn)
            # The notification carries the event; the alarm keeps the state (dashboards, rollback_alarms).
            self._alarm(
                rule_id.removesuffix("Rule") + "Alarm",
                f"HyperPod cluster {self.cluster_name}: {what} (EventBridge rule matched in the last 5 minutes)",
                cloudwatch.Metric(
                    namespace="AWS/Events",
                    metric_name="TriggeredRules",
                    dimensions_map={"RuleName": rule.rule_name},
                    statistic="Sum",
                    period=Duration.minutes(5),
                ),
                notify=False,
            )
        let_rules_publish(self.topic, rule_arns)
        # The log group's ID part is the cluster's ID, the last segment of Fn::GetAtt ClusterArn (HyperPodCluster
        # .cluster_id: Fn::Select/Fn::Split), so CloudFormation creates the filters after the cluster. A metric
        # filter needs its log group to exist; HyperPod creates the group when the first node runs its lifecycle
        # script, which is before the cluster is InService, which is when CloudFormation has created the cluster.
        # (The template cannot create the group itself: HyperPod would find it taken, or the template would.)
        log_group = logs.LogGroup.from_log_group_name(
            self, "LifecycleLogGroup", cluster_log_group(cluster.cluster_name, cluster.cluster_id)
        )
        namespace = Fn.join("/", [METRIC_NAMESPACE, cluster.cluster_name])
        self._log_alarm(
            "LifecycleFailure",
            log_group,
            LIFECYCLE_FAILURE_PATTERN,
            namespace,
            LIFECYCLE_METRIC,
            f"HyperPod cluster {self.cluster_name}: a node's lifecycle script failed (see `hyperpod-cdk logs`)",
        )
        # On Slurm the health agent's faults reach no EventBridge event (AWS's awsome-distributed-ai devops-agent
        # README: "the control plane does not currently emit that Warn event for HMA-attributed faults"), only
        # its log streams in the same group.
        self._log_alarm(
            "HealthAgent",
            log_group,
            HEALTH_AGENT_DETECTION_PATTERN,
            namespace,
            HEALTH_AGENT_METRIC,
            f"HyperPod cluster {self.cluster_name}: the health-monitoring agent detected a fault on a node "
            "(see `hyperpod-cdk logs --source health`)",
        )

    def _log_alarm(
        self, name: str, log_group: logs.ILogGroup, pattern: str, namespace: str, metric_name: str, description: str
    ) -> None:
        """A metric filter ``<name>Filter`` counting ``pattern``'s lines in ``log_group`` and an alarm
        ``<name>Alarm`` on it (to the topic) when one appears in five minutes."""
        matches = logs.MetricFilter(
            self,
            f"{name}Filter",
            log_group=log_group,
            filter_pattern=logs.FilterPattern.literal(pattern),
            metric_namespace=namespace,
            metric_name=metric_name,
            metric_value="1",
        )
        self._alarm(
            f"{name}Alarm", description, matches.metric(statistic="Sum", period=Duration.minutes(5)), notify=True
        )

    def _alarm(self, id: str, description: str, metric: cloudwatch.IMetric, *, notify: bool) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            id,
            alarm_description=description,
            metric=metric,
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if notify and self.topic is not None:
            alarm.add_alarm_action(actions.SnsAction(self.topic))
        return alarm

    def _grafana(self) -> grafana.CfnWorkspace:
        """Grafana signs users in with IAM Identity Center and reads the workspace with a role that may only
        query it."""
        assert self.workspace_arn is not None
        stack = Stack.of(self)
        role = iam.Role(
            self,
            "GrafanaRole",
            description=f"Amazon Managed Grafana of HyperPod cluster {self.cluster_name}: reads its metrics",
            assumed_by=iam.ServicePrincipal(
                "grafana.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": stack.account}}
            ),
        )
        role.add_to_policy(iam.PolicyStatement(actions=list(QUERY_ACTIONS), resources=[self.workspace_arn]))
        workspace = grafana.CfnWorkspace(
            self,
            "Grafana",
            description=f"Metrics of HyperPod cluster {self.cluster_name}",
            account_access_type="CURRENT_ACCOUNT",
            authentication_providers=["AWS_SSO"],
            permission_type="CUSTOMER_MANAGED",
            role_arn=role.role_arn,
            data_sources=["PROMETHEUS"],
        )
        return workspace

    @property
    def grafana_url(self) -> str | None:
        return f"https://{self.grafana.attr_endpoint}" if self.grafana is not None else None
