"""ClusterObservability in the composed stack: the workspace and its grant, the parameters file's metrics target,
the alarm topic and what publishes to it, Grafana, the organization's key, published templates, and off."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml

from hyperpod_cdk import (
    ClusterConfig,
    ConfigurationError,
    PublishedTrainingClusterStack,
    PublishTarget,
    TrainingClusterStack,
)
from hyperpod_cdk.constructs import PublishedLifecycleScripts
from hyperpod_cdk.constructs.alert_rules import (
    BOOTSTRAP_LOG_HINT,
    HEALTH_AGENT_DETECTION_PATTERN,
    HEALTH_AGENT_STREAM_PREFIX,
    LIFECYCLE_FAILURE_PATTERN,
    alert_rules,
    rule_groups_yaml,
)
from hyperpod_cdk.constructs.observability import (
    CLUSTER_EVENT,
    CLUSTER_STATE_CHANGE,
    NODE_HEALTH_EVENT,
    QUERY_ACTIONS,
)
from hyperpod_cdk.stacks.training_cluster import PUBLISHED_WORKSPACE
from iam_support import group_roles
from support import ROOT, fast_app, template_of, uploaded_files
from training_runtime.health.results import LOGIN_REASON_START
from training_runtime.log import FAILURE_MARKER
from training_runtime.metrics import guard as guard_metrics
from training_runtime.metrics.catalog import ALL_METRICS
from training_runtime.params import OUR_KEY, ProvisioningParameters

WORKSPACE = "arn:aws:aps:us-west-2:111122223333:workspace/ws-12345678-abcd-1234-abcd-123456789012"
KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd"
TARGET = PublishTarget("platform-templates", "teams/ml/")


class Built:
    def __init__(self, outdir: Path, data: dict[str, Any], published: bool = False) -> None:
        app = fast_app(outdir=str(outdir))
        config = ClusterConfig.model_validate(data)
        if published:
            self.stack: cdk.Stack = PublishedTrainingClusterStack(app, "p", config=config, target=TARGET)
        else:
            self.stack = TrainingClusterStack(app, "s", config=config)
        self.template = template_of(self.stack)
        self.outdir = outdir
        self.name = config.cluster_name

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.template["Resources"].items() if r["Type"] == kind}

    def one(self, kind: str) -> tuple[str, dict[str, Any]]:
        (found,) = self.of_type(kind).items()
        return found

    def parameters(self) -> dict[str, Any]:
        data: dict[str, Any]
        if isinstance(self.stack, PublishedTrainingClusterStack):
            lifecycle = self.stack.lifecycle
            assert isinstance(lifecycle, PublishedLifecycleScripts)
            (file,) = [v for k, v in lifecycle.files().items() if k.endswith("parameters.json")]
            data = json.loads(file)
        else:
            data = uploaded_files(self.outdir, self.template)[self.name]["parameters"]
        return data

    def statements(self, action: str) -> list[tuple[str, dict[str, Any]]]:
        """Every IAM policy statement (identity policies) that allows ``action``, with its policy's logical ID."""
        found = []
        for key, policy in self.of_type("AWS::IAM::Policy").items():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                if action in actions:
                    found.append((key, statement))
        return found

    def warnings(self) -> str:
        entries = cdk.assertions.Annotations.from_stack(self.stack).find_warning("*", cdk.assertions.Match.any_value())
        return json.dumps([w.entry.data for w in entries])


@pytest.fixture(scope="module")
def default(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return Built(tmp_path_factory.mktemp("default"), {})


@pytest.fixture(scope="module")
def continuous(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return Built(tmp_path_factory.mktemp("continuous"), {"node_provisioning_mode": "continuous"})


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return Built(tmp_path_factory.mktemp("imported"), {"observability": {"workspace_arn": WORKSPACE, "grafana": True}})


@pytest.fixture(scope="module")
def organization(tmp_path_factory: pytest.TempPathFactory) -> Built:
    data = {
        "organization": {"kms_key_arn": KEY},
        "observability": {"grafana": True, "alarms": {"emails": ["ops@example.com", "ml@example.com"]}},
    }
    return Built(tmp_path_factory.mktemp("org"), data)


def _execution_roles(built: Built) -> list[str]:
    return sorted(set(group_roles(built.template).values()))


# --- the workspace and the nodes' grant ------------------------------------------------------------------------
def test_every_groups_execution_role_may_remote_write_to_exactly_the_new_workspace(default: Built) -> None:
    """Every node runs the metrics agent (runtime steps/observability.py), so every group's role writes."""
    workspace_id, _ = default.one("AWS::APS::Workspace")
    grants = default.statements("aps:RemoteWrite")
    roles = []
    for policy_id, statement in grants:
        assert statement["Action"] == "aps:RemoteWrite"
        assert statement["Resource"] == {"Fn::GetAtt": [workspace_id, "Arn"]}
        roles += default.template["Resources"][policy_id]["Properties"]["Roles"]
    assert sorted(r["Ref"] for r in roles) == _execution_roles(default)


def test_the_nodes_parameters_name_the_new_workspace_and_the_node_parser_reads_them(default: Built) -> None:
    workspace_id, _ = default.one("AWS::APS::Workspace")
    data = default.parameters()
    metrics = data[OUR_KEY]["metrics"]
    assert set(metrics) == {"remote_write_url", "region"}
    # CloudFormation values stand in the uploaded file as markers the upload replaces: the URL is the
    # workspace's endpoint + api/v1/remote_write, which the stack's own output shows resolved the same way.
    output = default.template["Outputs"]["PrometheusRemoteWriteUrl"]["Value"]
    assert output == {"Fn::Join": ["", [{"Fn::GetAtt": [workspace_id, "PrometheusEndpoint"]}, "api/v1/remote_write"]]}
    ProvisioningParameters.from_json(data)


def test_an_existing_workspace_gets_the_grant_and_the_nodes_its_url_with_no_new_workspace(imported: Built) -> None:
    assert imported.of_type("AWS::APS::Workspace") == {}
    grants = imported.statements("aps:RemoteWrite")
    assert len(grants) == len(_execution_roles(imported))
    assert all(statement["Resource"] == WORKSPACE for _, statement in grants)
    assert imported.parameters()[OUR_KEY]["metrics"] == {
        "remote_write_url": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/"
        "ws-12345678-abcd-1234-abcd-123456789012/api/v1/remote_write",
        "region": "us-west-2",
    }
    # The alert rules go into that workspace (its own alert manager routes them).
    _, rules = imported.one("AWS::APS::RuleGroupsNamespace")
    assert rules["Properties"]["Workspace"] == WORKSPACE


def test_outputs_name_the_workspace_its_urls_grafana_and_the_topic(default: Built, imported: Built) -> None:
    topic_id, _ = default.one("AWS::SNS::Topic")
    outputs = default.template["Outputs"]
    assert outputs["AlarmTopicArn"]["Value"] == {"Ref": topic_id}
    assert {"PrometheusWorkspaceId", "PrometheusRemoteWriteUrl", "PrometheusQueryUrl"} <= set(outputs)
    assert "GrafanaUrl" not in outputs
    assert imported.template["Outputs"]["PrometheusQueryUrl"]["Value"].endswith(
        "ws-12345678-abcd-1234-abcd-123456789012/api/v1/query"
    )
    grafana_id, _ = imported.one("AWS::Grafana::Workspace")
    assert imported.template["Outputs"]["GrafanaUrl"]["Value"] == {
        "Fn::Join": ["", ["https://", {"Fn::GetAtt": [grafana_id, "Endpoint"]}]]
    }


# --- the alarm topic and what publishes to it -------------------------------------------------------------------
def test_the_topic_is_encrypted_with_its_own_key_that_its_publishers_may_use_and_takes_tls_only(default: Built) -> None:
    _, topic = default.one("AWS::SNS::Topic")
    key_id, key = default.one("AWS::KMS::Key")
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True
    allowed: set[str] = set()
    for s in key["Properties"]["KeyPolicy"]["Statement"]:
        if "kms:GenerateDataKey*" in s["Action"] and "Service" in s.get("Principal", {}):
            services = s["Principal"]["Service"]
            allowed.update(services if isinstance(services, list) else [services])
    assert {"events.amazonaws.com", "cloudwatch.amazonaws.com", "aps.amazonaws.com"} <= allowed
    _, policy = default.one("AWS::SNS::TopicPolicy")
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
    )
    by_service = {s["Principal"]["Service"]: s for s in statements if s["Effect"] == "Allow"}
    workspace_id, _ = default.one("AWS::APS::Workspace")
    assert by_service["aps.amazonaws.com"]["Condition"]["ArnEquals"] == {
        "aws:SourceArn": {"Fn::GetAtt": [workspace_id, "Arn"]}
    }
    assert "events.amazonaws.com" in by_service and "cloudwatch.amazonaws.com" in by_service


def test_the_new_workspace_sends_its_alerts_to_the_topic(default: Built) -> None:
    topic_id, _ = default.one("AWS::SNS::Topic")
    _, workspace = default.one("AWS::APS::Workspace")
    definition = workspace["Properties"]["AlertManagerDefinition"]["Fn::Join"][1]
    assert {"Ref": topic_id} in definition
    assert "sns_configs" in definition[0]


def _rules(built: Built) -> dict[str, str]:
    """Each event rule's detail-type, after checking it is this cluster's, to the topic, with its own alarm."""
    topic_id, _ = built.one("AWS::SNS::Topic")
    cluster_id, _ = built.one("AWS::SageMaker::Cluster")
    kinds = {}
    for rule_id, rule in built.of_type("AWS::Events::Rule").items():
        pattern = rule["Properties"]["EventPattern"]
        assert pattern["source"] == ["aws.sagemaker"]
        assert pattern["resources"] == [{"Fn::GetAtt": [cluster_id, "ClusterArn"]}]
        assert rule["Properties"]["Targets"][0]["Arn"] == {"Ref": topic_id}
        (kinds[rule_id],) = pattern["detail-type"]
        alarms = [
            a
            for a in built.of_type("AWS::CloudWatch::Alarm").values()
            if a["Properties"].get("Dimensions") == [{"Name": "RuleName", "Value": {"Ref": rule_id}}]
        ]
        assert len(alarms) == 1 and alarms[0]["Properties"]["MetricName"] == "TriggeredRules"
    return kinds


def test_hyperpod_events_of_this_cluster_go_to_the_topic_and_each_rule_has_an_alarm(default: Built) -> None:
    """Without continuous provisioning there are no cluster events, so no rule waits for them."""
    assert sorted(_rules(default).values()) == sorted([CLUSTER_STATE_CHANGE, NODE_HEALTH_EVENT])


def test_a_continuous_cluster_also_alarms_on_its_error_events(continuous: Built) -> None:
    kinds = _rules(continuous)
    assert sorted(kinds.values()) == sorted([CLUSTER_STATE_CHANGE, NODE_HEALTH_EVENT, CLUSTER_EVENT])
    (error_rule,) = [k for k, v in kinds.items() if v == CLUSTER_EVENT]
    pattern = continuous.template["Resources"][error_rule]["Properties"]["EventPattern"]
    assert pattern["detail"] == {"EventDetails": {"EventLevel": ["Error"]}}


def _filter(built: Built, pattern: str) -> dict[str, Any]:
    (found,) = [
        f["Properties"]
        for f in built.of_type("AWS::Logs::MetricFilter").values()
        if f["Properties"]["FilterPattern"] == pattern
    ]
    return found


def _alarm_on(built: Built, props: dict[str, Any]) -> dict[str, Any]:
    (transform,) = props["MetricTransformations"]
    (alarm,) = [
        a["Properties"]
        for a in built.of_type("AWS::CloudWatch::Alarm").values()
        if a["Properties"]["MetricName"] == transform["MetricName"]
    ]
    assert alarm["Namespace"] == transform["MetricNamespace"]
    return alarm


def test_a_failed_lifecycle_run_in_the_clusters_log_group_raises_an_alarm_on_the_topic(default: Built) -> None:
    topic_id, _ = default.one("AWS::SNS::Topic")
    cluster_id, _ = default.one("AWS::SageMaker::Cluster")
    props = _filter(default, LIFECYCLE_FAILURE_PATTERN)
    log_group = json.dumps(props["LogGroupName"])
    assert "/aws/sagemaker/Clusters/ml-cluster/" in log_group and f'"{cluster_id}", "ClusterArn"' in log_group
    assert _alarm_on(default, props)["AlarmActions"] == [{"Ref": topic_id}]


@pytest.mark.parametrize("fixture", ["default", "continuous"])
def test_the_health_agent_s_detections_in_the_clusters_log_group_raise_an_alarm_on_the_topic(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    """On Slurm the agent's GPU faults reach no EventBridge event: the alarm reads its log streams."""
    built: Built = request.getfixturevalue(fixture)
    topic_id, _ = built.one("AWS::SNS::Topic")
    cluster_id, _ = built.one("AWS::SageMaker::Cluster")
    props = _filter(built, HEALTH_AGENT_DETECTION_PATTERN)
    # /aws/sagemaker/Clusters/<name>/<id>, the ID being the last segment of the cluster's ARN
    assert props["LogGroupName"] == {
        "Fn::Join": [
            "",
            [
                "/aws/sagemaker/Clusters/ml-cluster/",
                {"Fn::Select": [1, {"Fn::Split": ["cluster/", {"Fn::GetAtt": [cluster_id, "ClusterArn"]}]}]},
            ],
        ]
    }
    assert props["LogGroupName"] == _filter(built, LIFECYCLE_FAILURE_PATTERN)["LogGroupName"]
    (transform,) = props["MetricTransformations"]
    assert transform["MetricValue"] == "1"
    alarm = _alarm_on(built, props)
    assert alarm["AlarmActions"] == [{"Ref": topic_id}]
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["Statistic"]) == (
        1,
        "GreaterThanOrEqualToThreshold",
        "Sum",
    )


def _json_matches(pattern: str, line: str) -> bool:
    """CloudWatch Logs' rule for a JSON pattern ``{ $.KEY = "VALUE" }``: the event is JSON whose KEY equals VALUE."""
    match = re.fullmatch(r'\{ \$\.(\w+) = "([^"]+)" \}', pattern)
    assert match, pattern
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and record.get(match[1]) == match[2]


HMA_RECORDS = [
    # AWS docs, "Health Monitoring Agent" (sagemaker-hyperpod-eks-resiliency-health-monitoring-agent), example output
    {
        "level": "info",
        "ts": "2024-08-21T18:35:35Z",
        "msg": "NPD caught event: %v",
        "details": {
            "severity": "warn",
            "timestamp": "2024-08-22T20:59:29Z",
            "reason": "XidHardwareFailure",
            "message": "Node condition NvidiaErrorReboot is now: True, reason: XidHardwareFailure, message: "
            '"NVRM: Xid (PCI:0000:b9:00): 71, pid=<unknown>, name=<unknown>, NVLink: fatal error detected on link 6"',
        },
        "HealthMonitoringAgentDetectionEvent": "HealthEvent",
    },
    # a Slurm record as AWS's own bridge documents it (awsome-distributed-ai, tools/devops-agent, hma_cw_bridge.py)
    {
        "level": "info",
        "ts": "2026-07-20T22:53:17Z",
        "msg": "DCGM Policy Violation found ",
        "condition: ": "XID Error",
        "data: ": {"ErrNum": 79},
        "HealthMonitoringAgentDetectionEvent": "HealthEvent",
    },
]


def test_the_health_agent_pattern_matches_its_documented_records_and_nothing_of_the_lifecycle_log() -> None:
    assert HEALTH_AGENT_STREAM_PREFIX == "SagemakerHealthMonitoringAgent"
    for record in HMA_RECORDS:
        assert _json_matches(HEALTH_AGENT_DETECTION_PATTERN, json.dumps(record))
    others = [
        json.dumps({"level": "info", "ts": "2026-07-20T22:53:17Z", "msg": "agent started"}),
        json.dumps({**HMA_RECORDS[0], "HealthMonitoringAgentDetectionEvent": "Heartbeat"}),
        f"{FAILURE_MARKER} at users: no such group (full log: /var/log/hyperpod-cdk/bootstrap.log)",
        "[hyperpod-cdk] step storage: ok",
    ]
    assert not any(_json_matches(HEALTH_AGENT_DETECTION_PATTERN, line) for line in others)


def _matches(pattern: str, line: str) -> bool:
    """CloudWatch Logs' rule for a pattern of quoted terms: every term occurs in the event (case-sensitive)."""
    assert re.fullmatch(r'(\s*"[^"]+")+\s*', pattern), pattern
    return all(term in line for term in re.findall(r'"([^"]+)"', pattern))


@pytest.mark.parametrize(
    "runtime",
    [
        f"import sys\nsys.stderr.write('{FAILURE_MARKER} at users: no such group\\n')\nsys.exit(1)\n",
        "raise SystemExit(3)\n",  # the runtime dies before it can say why
    ],
    ids=["runtime-says-why", "runtime-crashes"],
)
def test_the_filter_matches_exactly_the_last_line_of_each_failed_lifecycle_run(tmp_path: Path, runtime: str) -> None:
    script = (ROOT / "src/hyperpod_cdk/lifecycle_assets/bootstrap.sh").read_text()
    log_path = "/var/log/hyperpod-cdk/bootstrap.log"
    assert log_path in script
    (tmp_path / "bootstrap.sh").write_text(script.replace(log_path, str(tmp_path / "logs/bootstrap.log")))
    (tmp_path / "training_runtime").mkdir()
    (tmp_path / "training_runtime/__main__.py").write_text(runtime)
    run = subprocess.run(["bash", str(tmp_path / "bootstrap.sh")], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    lines = (run.stdout + run.stderr).splitlines()
    assert [line for line in lines if _matches(LIFECYCLE_FAILURE_PATTERN, line)] == [run.stderr.splitlines()[-1]]
    assert BOOTSTRAP_LOG_HINT in lines[-1] or BOOTSTRAP_LOG_HINT in run.stderr


def test_the_alert_rules_select_this_cluster_and_use_the_contract_metrics() -> None:
    (group,) = yaml.safe_load(rule_groups_yaml("team-a"))["groups"]
    exprs = {r["alert"]: r["expr"] for r in group["rules"]}
    assert set(exprs) == {r.name for r in alert_rules("team-a")}
    assert all('cluster="team-a"' in e for e in exprs.values())
    assert exprs["NodeUnavailable"].startswith("slurm_node_state{")
    states = re.search(r'state=~"\(([a-z|]+)\)', exprs["NodeUnavailable"])
    assert states is not None and {"drain", "down", "fail"} <= set(states.group(1).split("|"))
    # A HyperPod login node drained to keep batch jobs off it (HyperPod's dev partition) is not a fault.
    assert f'reason!~"{LOGIN_REASON_START}.*"' in exprs["NodeUnavailable"]


def test_the_slurm_guard_alarms_on_each_repair_on_what_it_only_reports_and_on_its_silence() -> None:
    """Each repair is alarmable (issue #43): the guard's metrics, by their names in the runtime's catalog."""
    (group,) = yaml.safe_load(rule_groups_yaml("team-a"))["groups"]
    rules = {r["alert"]: r for r in group["rules"]}
    assert rules["SlurmGuardRepaired"]["expr"] == f'increase({guard_metrics.REPAIRS}{{cluster="team-a"}}[15m]) > 0'
    assert rules["SlurmGuardProblem"]["expr"] == f'{guard_metrics.PROBLEM}{{cluster="team-a"}} == 1'
    assert rules["SlurmGuardProblem"]["labels"]["severity"] == "critical"
    assert rules["SlurmGuardSilent"]["expr"].startswith(f'time() - {guard_metrics.HEARTBEAT}{{cluster="team-a"}} > ')
    assert set(guard_metrics.METRIC_NAMES) <= ALL_METRICS


# --- Grafana and the organization's key ---------------------------------------------------------------------------
def test_grafana_signs_in_with_identity_center_and_may_only_query_the_workspace(organization: Built) -> None:
    _, grafana = organization.one("AWS::Grafana::Workspace")
    props = grafana["Properties"]
    assert props["AuthenticationProviders"] == ["AWS_SSO"] and props["PermissionType"] == "CUSTOMER_MANAGED"
    role_id = props["RoleArn"]["Fn::GetAtt"][0]
    workspace_id, _ = organization.one("AWS::APS::Workspace")
    policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in organization.of_type("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    assert policies == [
        [{"Action": list(QUERY_ACTIONS), "Effect": "Allow", "Resource": {"Fn::GetAtt": [workspace_id, "Arn"]}}]
    ]


def test_the_organizations_key_encrypts_the_workspace_and_each_address_is_subscribed(organization: Built) -> None:
    _, workspace = organization.one("AWS::APS::Workspace")
    assert workspace["Properties"]["KmsKeyArn"] == KEY
    endpoints = sorted(s["Properties"]["Endpoint"] for s in organization.of_type("AWS::SNS::Subscription").values())
    assert endpoints == ["ml@example.com", "ops@example.com"]


# --- published templates and off ------------------------------------------------------------------------------
def test_a_published_template_without_a_workspace_arn_ships_no_metrics_keeps_the_alarms_and_says_so(
    tmp_path: Path,
) -> None:
    built = Built(tmp_path, {}, published=True)
    assert built.of_type("AWS::APS::Workspace") == {} and built.statements("aps:RemoteWrite") == []
    assert "metrics" not in built.parameters()[OUR_KEY]
    assert built.of_type("AWS::Events::Rule") and built.of_type("AWS::Logs::MetricFilter")
    assert PUBLISHED_WORKSPACE in built.warnings() and "observability.workspace_arn" in built.warnings()


def test_a_published_template_with_a_workspace_arn_writes_its_url_at_synth(tmp_path: Path) -> None:
    built = Built(tmp_path, {"observability": {"workspace_arn": WORKSPACE}}, published=True)
    assert built.parameters()[OUR_KEY]["metrics"]["region"] == "us-west-2"
    assert PUBLISHED_WORKSPACE not in built.warnings()


def test_a_published_template_refuses_grafana_without_a_workspace_arn() -> None:
    config = ClusterConfig.model_validate({"observability": {"grafana": True}})
    with pytest.raises(ConfigurationError, match=r"observability\.workspace_arn"):
        PublishedTrainingClusterStack(fast_app(), "p", config=config, target=TARGET)


def test_observability_off_adds_nothing_and_the_nodes_get_no_metrics(tmp_path: Path, default: Built) -> None:
    built = Built(tmp_path, {"observability": {"enabled": False}})
    kinds = {r["Type"] for r in built.template["Resources"].values()}
    new = {r["Type"] for r in default.template["Resources"].values()} - kinds
    assert new == {
        "AWS::APS::Workspace",
        "AWS::APS::RuleGroupsNamespace",
        "AWS::SNS::Topic",
        "AWS::SNS::TopicPolicy",
        "AWS::KMS::Key",
        "AWS::Events::Rule",
        "AWS::CloudWatch::Alarm",
        "AWS::Logs::MetricFilter",
    }
    assert built.statements("aps:RemoteWrite") == []
    assert "metrics" not in built.parameters()[OUR_KEY]
    assert not {"AlarmTopicArn", "PrometheusWorkspaceId"} & set(built.template["Outputs"])
