"""What the alarms watch, as text: Prometheus alert rules for the cluster's metrics and the CloudWatch Logs
filter pattern of a failed lifecycle run. Pure functions (no aws_cdk), so tests read them directly.

The metric names and the out-of-service states come from the node side's collector
(:mod:`training_runtime.metrics.slurm`), which emits them.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from training_runtime.health.results import LOGIN_REASON_START
from training_runtime.log import FAILURE_MARKER
from training_runtime.metrics import guard as guard_metrics
from training_runtime.metrics import security as security_metrics
from training_runtime.metrics import slurm as slurm_metrics

# --- metric and label names: the collector's (training_runtime.metrics), defined once there ------------------
UP = "up"
"""Prometheus' own per-target health: 1 when the last scrape of an exporter worked."""
SLURM_NODE_STATE = slurm_metrics.NODE_STATE
SLURM_COLLECTOR_SUCCESS = slurm_metrics.SUCCESS
SLURM_SECURITY_AFFECTED = security_metrics.AFFECTED
SECURITY_DOC = "docs/operations.md, Slurm security releases"
CLUSTER_LABEL = "cluster"
"""Added to every series by the node's scrape configuration: the Slurm cluster name."""
UNAVAILABLE_STATES = slurm_metrics.OUT_OF_SERVICE_STATES
GUARD_REPAIRS = guard_metrics.REPAIRS
GUARD_PROBLEM = guard_metrics.PROBLEM
GUARD_HEARTBEAT = guard_metrics.HEARTBEAT
GUARD_SILENT_S = 600
"""The Slurm guard checks at least once a minute (training_runtime.guard.service.RECHECK_S): ten minutes without a
check is a guard that stopped."""
NOT_A_FAULT = LOGIN_REASON_START
"""The start of the drain reason a HyperPod login node gives itself to keep batch jobs off (it sits in HyperPod's
``dev`` partition; docs/node-runtime.md): drained on purpose, for good, so no alert."""

# --- the lifecycle log ------------------------------------------------------------------------------------
BOOTSTRAP_LOG_HINT = "full log"
"""Words of the last line lifecycle_assets/bootstrap.sh writes after a failed run (with the failure marker)."""
LIFECYCLE_FAILURE_PATTERN = f'"{FAILURE_MARKER}" "{BOOTSTRAP_LOG_HINT}"'
"""CloudWatch Logs filter pattern (quoted terms, all must occur) matching the one line each failed lifecycle
run ends with, whether the runtime said why or crashed before it could."""


# --- the health-monitoring agent's log -----------------------------------------------------------------------
HEALTH_AGENT_STREAM_PREFIX = "SagemakerHealthMonitoringAgent"
"""HyperPod's health-monitoring agent (HMA) writes to streams ``SagemakerHealthMonitoringAgent/<group>/<instance>``
of the cluster's log group (AWS docs, "Health Monitoring Agent", sagemaker-hyperpod-eks-resiliency-health-
monitoring-agent; the stream grammar from AWS's awsome-distributed-ai devops-agent tooling)."""
HEALTH_AGENT_DETECTION_PATTERN = '{ $.HealthMonitoringAgentDetectionEvent = "HealthEvent" }'
"""CloudWatch Logs JSON filter pattern of one HMA detection record. AWS documents the records as JSON lines with
``"HealthMonitoringAgentDetectionEvent": "HealthEvent"`` at the top (its Logs Insights example filters on that
word), and AWS's own Slurm bridge (awsome-distributed-ai, tools/devops-agent, hma_cw_bridge.py) subscribes to the
cluster's log group with exactly this pattern. A metric filter cannot select log streams, so the pattern alone
keeps lifecycle-script lines out: they are not JSON with that key."""


@dataclass(frozen=True)
class AlertRule:
    """One Prometheus alerting rule."""

    name: str
    expr: str
    for_: str
    summary: str
    severity: str = "critical"


def alert_rules(cluster_name: str) -> list[AlertRule]:
    """The alerts of one cluster, selected by its ``cluster`` label (a shared workspace holds other clusters)."""
    selector = f'{CLUSTER_LABEL}="{cluster_name}"'
    states = "|".join(UNAVAILABLE_STATES)
    return [
        AlertRule(
            "ExporterDown",
            f"{UP}{{{selector}}} == 0",
            "5m",
            "An exporter on {{ $labels.instance }} ({{ $labels.job }}) has not answered a scrape for 5 minutes",
        ),
        AlertRule(
            "MetricsAbsent",
            f"absent({UP}{{{selector}}})",
            "15m",
            f"No node of cluster {cluster_name} has sent metrics for 15 minutes (agent or remote write broken)",
        ),
        AlertRule(
            "NodeUnavailable",
            f'{SLURM_NODE_STATE}{{{selector},state=~"({states})[*~#!%$@^-]?",reason!~"{NOT_A_FAULT}.*"}} == 1',
            "10m",
            "Slurm node {{ $labels.node }} is {{ $labels.state }}: {{ $labels.reason }}",
            severity="warning",
        ),
        AlertRule(
            "SlurmGuardRepaired",
            f"increase({GUARD_REPAIRS}{{{selector}}}[15m]) > 0",
            "0m",
            "The Slurm guard on {{ $labels.instance }} repaired {{ $labels.check }}: HyperPod's Slurm files were left "
            "broken (docs/node-runtime.md, The Slurm guard)",
            severity="warning",
        ),
        AlertRule(
            "SlurmGuardProblem",
            f"{GUARD_PROBLEM}{{{selector}}} == 1",
            "5m",
            "The Slurm guard on {{ $labels.instance }} finds {{ $labels.check }}, which it does not repair: its log "
            "says what (docs/node-runtime.md, The Slurm guard)",
        ),
        AlertRule(
            "SlurmGuardSilent",
            f"time() - {GUARD_HEARTBEAT}{{{selector}}} > {GUARD_SILENT_S}",
            "5m",
            "The Slurm guard on {{ $labels.instance }} has not checked Slurm's files for 10 minutes (stopped?)",
            severity="warning",
        ),
        AlertRule(
            "SlurmCollectorFailing",
            f"{SLURM_COLLECTOR_SUCCESS}{{{selector}}} == 0",
            "10m",
            "The Slurm collector on {{ $labels.instance }} has failed for 10 minutes (Slurm metrics are stale)",
            severity="warning",
        ),
        AlertRule(
            "SlurmSecurityAffected",
            f"{SLURM_SECURITY_AFFECTED}{{{selector}}} == 1",
            "10m",
            f"Slurm {{{{ $labels.version }}}} on cluster {cluster_name} is affected by {{{{ $labels.cves }}}}. Fix: "
            f"{{{{ $labels.fixed_by }}}} ({SECURITY_DOC})",
            severity="warning",
        ),
    ]


def rule_groups_yaml(cluster_name: str) -> str:
    """The rules file (Prometheus' format, which Amazon Managed Service for Prometheus takes as-is)."""
    rules = [
        {
            "alert": r.name,
            "expr": r.expr,
            "for": r.for_,
            "labels": {"severity": r.severity, CLUSTER_LABEL: cluster_name},
            "annotations": {"summary": r.summary},
        }
        for r in alert_rules(cluster_name)
    ]
    return yaml.safe_dump({"groups": [{"name": f"hyperpod-{cluster_name}", "rules": rules}]}, sort_keys=False)


def alertmanager_yaml(topic_arn: str, region: str) -> str:
    """Alert manager configuration that sends every alert to the SNS topic (signed with SigV4 in ``region``).

    ``topic_arn`` and ``region`` may be CDK tokens: they are placed verbatim, so the YAML stays a string
    CloudFormation completes at deploy."""
    return (
        "alertmanager_config: |\n"
        "  route:\n"
        "    receiver: sns\n"
        "    group_by: [alertname, cluster]\n"
        "  receivers:\n"
        "    - name: sns\n"
        "      sns_configs:\n"
        f"        - topic_arn: {topic_arn}\n"
        "          sigv4:\n"
        f"            region: {region}\n"
        "          subject: 'hyperpod-cdk: {{ .CommonLabels.alertname }} on {{ .CommonLabels.cluster }}'\n"
    )
