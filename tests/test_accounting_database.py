"""One setting, ``runtime.accounting`` with an external database, from the config to the controller: in api-driven
mode with continuous provisioning HyperPod is given it (``AccountingDatabase``), the parameters file the nodes read
says HyperPod runs slurmdbd, and the controller's plan has none of the runtime's slurmdbd steps. Without continuous
provisioning the config stays valid: the runtime runs slurmdbd, with a warning that says how to switch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from hyperpod_cdk import TrainingClusterStack, parse_config
from runtime_fakes import fake_node
from support import fast_app, uploaded_files
from training_runtime.params import ProvisioningParameters
from training_runtime.steps.catalog import steps_for

SECRET = "arn:aws:secretsmanager:us-west-2:111122223333:secret:slurm-db-AbCdEf"
HOST = "acct.cluster-abc.us-west-2.rds.amazonaws.com"
CONFIG = {
    "cluster_name": "acct",
    "instance_groups": [
        {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
        {"name": "workers", "instance_type": "ml.c5.xlarge", "count": 2},
    ],
    "runtime": {
        "accounting": {
            "enabled": True,
            "database": "external",
            "host": HOST,
            "port": 3307,
            "password_secret_arn": SECRET,
            "ca_bundle_sha256": "0" * 64,  # where the runtime runs slurmdbd, over TLS (CL-ACCOUNTING-TLS)
        }
    },
}
NODES = {"controller": [("controller-1", "10.1.0.10")], "workers": [("workers-1", "10.1.0.11")]}


def synth(tmp_path_factory: pytest.TempPathFactory, **config: Any) -> tuple[cdk.Stack, dict[str, Any], Path]:
    outdir = tmp_path_factory.mktemp("acct")
    app = fast_app(outdir=str(outdir))
    stack = TrainingClusterStack(app, "Acct", config=parse_config({**CONFIG, **config}))
    app.synth()
    return stack, Template.from_stack(stack).to_json(), outdir


@pytest.fixture(scope="module")
def continuous(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, dict[str, Any], Path]:
    return synth(tmp_path_factory, node_provisioning_mode="continuous")


@pytest.fixture(scope="module")
def all_or_nothing(tmp_path_factory: pytest.TempPathFactory) -> tuple[cdk.Stack, dict[str, Any], Path]:
    return synth(tmp_path_factory)


def slurm_settings(template: dict[str, Any]) -> dict[str, Any]:
    (cluster,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    return dict(cluster["Properties"]["Orchestrator"]["Slurm"])


def parameters(template: dict[str, Any], outdir: Path) -> ProvisioningParameters:
    (upload,) = uploaded_files(outdir, template).values()
    return ProvisioningParameters.from_json(upload["parameters"])  # the node's own parser


def controller_plan(tmp_path: Path, params: ProvisioningParameters) -> set[str]:
    node = fake_node(tmp_path, instance="controller-1", params=params, instances=NODES)
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    return {s.name for s in steps_for(node)}


def test_hyperpod_is_given_the_database_and_the_nodes_are_told(
    continuous: tuple[cdk.Stack, dict[str, Any], Path], tmp_path: Path
) -> None:
    _, template, outdir = continuous
    assert slurm_settings(template)["AccountingDatabase"] == {
        "Endpoint": HOST,
        "Port": 3307,
        "SecretArn": SECRET,
        "Name": "slurm_acct_db",
    }
    params = parameters(template, outdir)
    assert params.slurmdbd_by_hyperpod
    plan = controller_plan(tmp_path, params)
    assert {"slurmdbd-config", "daemon:slurmdbd", "accounting-cluster", "slurm-accounting-include"} & plan == set()


def test_the_execution_role_reads_the_one_secret(continuous: tuple[cdk.Stack, dict[str, Any], Path]) -> None:
    _, template, _ = continuous
    reads = [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
        for s in r["Properties"]["PolicyDocument"]["Statement"]
        if "secretsmanager:GetSecretValue" in json.dumps(s["Action"])
    ]
    assert [s["Resource"] for s in reads] == [SECRET]


def test_without_continuous_provisioning_the_runtime_runs_slurmdbd_with_a_warning(
    all_or_nothing: tuple[cdk.Stack, dict[str, Any], Path], tmp_path: Path
) -> None:
    stack, template, outdir = all_or_nothing
    assert "AccountingDatabase" not in slurm_settings(template)
    params = parameters(template, outdir)
    assert not params.slurmdbd_by_hyperpod
    assert {"slurmdbd-config", "daemon:slurmdbd", "accounting-cluster"} <= controller_plan(tmp_path, params)
    warnings = cdk.assertions.Annotations.from_stack(stack).find_warning("*", cdk.assertions.Match.any_value())
    assert any("CL-ACCOUNTING-CONTINUOUS" in json.dumps(w.entry.data) for w in warnings), warnings
