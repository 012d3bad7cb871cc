"""A deployed group keeps its execution role (AWS: "For updating an existing instance group, keep using the same IAM
role you attached during cluster creation"): synth reads each deployed group's ExecutionRole (DescribeCluster, moto
here), records it in cdk.context.json, and the template keeps a group deployed on the shared role on the controller's
role (the shared role's logical ID) while a new group gets its own; a template that would change a deployed group's
role is refused before deploy (docs/execution-roles.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Annotations, Match, Template

from builders import CONTROLLER, WORKERS, new_stack
from hyperpod_cdk import ClusterNetwork, ConfigurationError, HyperPodCluster, LifecycleScripts, TrainingClusterStack
from hyperpod_cdk.core.config import parse_model
from hyperpod_cdk.core.deployment import deployment
from hyperpod_cdk.deployed.roles import kept_roles
from hyperpod_cdk.deployed.synth_context import cached_roles
from iam_support import group_roles
from ops_support import ROLE, MotoCluster, aws_env, moto_url  # noqa: F401
from support import fast_app, synth_bundled_app

REGION = "us-west-2"  # ops_support's
SHARED_ROLE_ID = "ClusterExecutionRole766E14D2"
"""The logical ID of the one role every group shared before roles per group; the controller's role kept it."""
OWN = "arn:aws:iam::123456789012:role/hyperpod-gpu-own"
KEY = f"hyperpod-cdk:deployed-roles:region={REGION}:cluster=roles"
KEEP_ROLE_QUOTE = "For updating an existing instance group, keep using the same IAM role you attached"
GROUPS: dict[str, tuple[str, int, str | None]] = {
    "controller": ("ml.m5.xlarge", 1, "Controller"),
    "login": ("ml.m5.xlarge", 1, "Login"),
    "gpu": ("ml.c5.xlarge", 1, "Compute"),
}


def data(*extra: dict[str, Any], **gpu: Any) -> dict[str, Any]:
    return {
        "cluster_name": "roles",
        "instance_groups": [
            {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
            {"name": "login", "role": "login", "instance_type": "ml.m5.xlarge", "count": 1},
            {"name": "gpu", "instance_type": "ml.c5.xlarge", "count": 1, **gpu},
            *extra,
        ],
        "observability": {"enabled": False},
    }


NEW_GROUP = {"name": "gpu2", "instance_type": "ml.c5.xlarge", "count": 1}


def synth(config: dict[str, Any], roles: dict[str, str] | None) -> tuple[Mapping[str, Any], list[str]]:
    """The template and its warnings."""
    stack = TrainingClusterStack(
        fast_app(), "roles", config=parse_model(config), deployed_roles=roles, env=cdk.Environment(region=REGION)
    )
    found = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(".*GRP-DEPLOYED-ROLE.*"))
    return Template.from_stack(stack).to_json(), [str(w.entry.data) for w in found]


def context_of(path: Path, given: dict[str, Any] | None = None) -> Any:
    """What the CDK CLI gives the app: cdk.context.json's keys (and -c values)."""
    found = json.loads(path.read_text()) if path.exists() else {}
    return {**found, **(given or {})}.get


def no_call() -> Any:
    raise AssertionError("no AWS call expected")


# --- the look-up, against moto ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("aws_env")
def test_groups_deployed_on_the_shared_role_stay_on_the_controllers_role_and_a_new_group_gets_its_own(
    tmp_path: Path,
) -> None:
    MotoCluster("roles", GROUPS).create()  # moto's cluster: every group on one role, as main 9211ce2 deployed it
    path = tmp_path / "cdk.context.json"
    config = data(NEW_GROUP)
    roles = cached_roles(deployment(parse_model(config)), context_of(path), context_file=path)
    assert roles == {"controller": ROLE, "login": ROLE, "gpu": ROLE}
    template, warnings = synth(config, roles)
    found = group_roles(template)
    assert {g: found[g] for g in GROUPS} == {g: SHARED_ROLE_ID for g in GROUPS}  # ExecutionRole unchanged
    assert found["gpu2"] != SHARED_ROLE_ID and found["gpu2"].startswith("ClusterExecutionRolegpu2")
    assert len(warnings) == 2
    for index, name in ((1, "login"), (2, "gpu")):
        (warning,) = [w for w in warnings if f"instance_groups[{index}].execution_role" in w]
        assert f"group {name!r} is deployed on the execution role it shares with the controller" in warning
        assert KEEP_ROLE_QUOTE in warning and "add a new group" in warning


@pytest.mark.usefixtures("aws_env")
def test_the_roles_are_recorded_in_cdk_context_json_and_the_next_synth_asks_nothing(tmp_path: Path) -> None:
    MotoCluster("roles", GROUPS).create()
    path = tmp_path / "cdk.context.json"
    path.write_text(json.dumps({"availability-zones:account=1:region=us-west-2": ["us-west-2a"]}))
    deployed = deployment(parse_model(data()))
    assert cached_roles(deployed, context_of(path), context_file=path) == {g: ROLE for g in GROUPS}
    assert json.loads(path.read_text()) == {
        "availability-zones:account=1:region=us-west-2": ["us-west-2a"],  # CDK's own keys are kept
        KEY: {g: ROLE for g in GROUPS},
    }
    again = cached_roles(deployed, context_of(path), client=no_call, credentials=lambda: False, context_file=path)
    assert again == {g: ROLE for g in GROUPS}  # from the record, though nothing could be looked up now


@pytest.mark.usefixtures("aws_env")
def test_no_cluster_is_not_recorded_and_every_group_gets_its_own_role(tmp_path: Path) -> None:
    path = tmp_path / "cdk.context.json"
    config = data()
    assert cached_roles(deployment(parse_model(config)), context_of(path), context_file=path) is None
    assert not path.exists()  # the first synth after the cluster exists records it
    found = group_roles(synth(config, None)[0])
    assert len(set(found.values())) == 3 and found["controller"] == SHARED_ROLE_ID


@pytest.mark.usefixtures("aws_env")
def test_credentials_of_another_account_than_the_one_cdk_deploys_to_are_refused(tmp_path: Path) -> None:
    """``cdk deploy --profile P`` gives the app the default credentials (the CLI sets only CDK_DEFAULT_ACCOUNT and
    CDK_DEFAULT_REGION): a look-up there would miss the cluster and give every group a new role."""
    MotoCluster("roles", GROUPS).create()
    path = tmp_path / "cdk.context.json"
    deployed = deployment(parse_model(data()))
    with pytest.raises(ConfigurationError) as error:
        cached_roles(deployed, context_of(path), context_file=path, target_account="111122223333")
    (problem,) = error.value.problems
    assert "account 123456789012's and the CDK CLI deploys to account 111122223333" in problem  # moto's account
    assert "AWS_PROFILE=<profile> cdk deploy" in problem and not path.exists()
    same = cached_roles(deployed, context_of(path), context_file=path, target_account="123456789012")
    assert same == {g: ROLE for g in GROUPS}


def test_without_credentials_nothing_is_looked_up_and_each_group_gets_its_own_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))  # none: a fresh machine
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_REGION", REGION)
    path, said = tmp_path / "cdk.context.json", list[str]()
    deployed = deployment(parse_model(data()))
    assert cached_roles(deployed, context_of(path), client=no_call, context_file=path, say=said.append) is None
    assert not path.exists() and len(said) == 1 and said[0].startswith("info: hyperpod-cdk: no AWS credentials")
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("CDK_DEFAULT_REGION", raising=False)
    assert cached_roles(deployed, context_of(path), client=no_call, context_file=path, say=said.append) is None
    assert said[1].startswith("info: hyperpod-cdk: no AWS Region")


def test_a_failed_look_up_with_credentials_refuses_to_guess_and_config_asks_nothing(tmp_path: Path) -> None:
    def denied() -> Any:
        raise RuntimeError("AccessDeniedException: not authorized to perform: sagemaker:DescribeCluster")

    path = tmp_path / "cdk.context.json"
    deployed = deployment(parse_model(data()))
    with pytest.raises(ConfigurationError) as error:
        cached_roles(deployed, context_of(path), client=denied, credentials=lambda: True, region=REGION)
    (problem,) = error.value.problems
    assert problem.rule == "GRP-DEPLOYED-ROLE"  # type: ignore[attr-defined]
    assert "AccessDeniedException" in problem and "-c execution_roles=config" in problem
    choice = context_of(path, {"execution_roles": "config"})
    assert cached_roles(deployed, choice, client=no_call, credentials=lambda: True, region=REGION) is None


# --- what the template does with the deployed roles ---------------------------------------------------------------


def test_a_deployed_group_on_its_own_role_keeps_it() -> None:
    roles = {"controller": ROLE, "login": ROLE, "gpu": OWN}  # gpu deployed by this version: its own role
    template, warnings = synth(data(), roles)
    found = group_roles(template)
    assert found["gpu"] != SHARED_ROLE_ID and found["login"] == SHARED_ROLE_ID
    assert [w for w in warnings if "gpu" in w] == []


def test_a_deployed_group_on_its_own_role_set_to_controller_is_refused_with_awss_words() -> None:
    roles = {"controller": ROLE, "login": ROLE, "gpu": OWN}
    with pytest.raises(ConfigurationError) as error:
        synth(data(execution_role="controller"), roles)
    (problem,) = error.value.problems
    assert problem.path == "instance_groups[2].execution_role"  # type: ignore[attr-defined]
    assert f"group 'gpu' is deployed on a role of its own ({OWN}), not the controller's ({ROLE})" in problem
    assert KEEP_ROLE_QUOTE in problem and "leave execution_role out (own)" in problem


def test_a_group_set_to_controller_on_the_shared_role_stays_there_without_a_second_warning() -> None:
    template, warnings = synth(data(execution_role="controller"), {g: ROLE for g in GROUPS})
    assert group_roles(template)["gpu"] == SHARED_ROLE_ID
    assert [w for w in warnings if "'gpu'" in w] == []  # GRP-CONTROLLER-ROLE already says it


def test_kept_roles_changes_nothing_without_a_deployed_controller() -> None:
    groups = parse_model(data()).instance_groups
    assert kept_roles(groups, None) == (list(groups), [])
    assert kept_roles(groups, {"gpu": ROLE}) == (list(groups), [])  # another cluster's groups: nothing to keep


# --- HyperPodCluster, as a platform team's own app passes the look-up ---------------------------------------------


def _cluster(stack: cdk.Stack, **props: Any) -> HyperPodCluster:
    return HyperPodCluster(
        stack,
        "Cluster",
        cluster_name="embedded",
        network=ClusterNetwork(stack, "Network"),
        lifecycle=LifecycleScripts(stack, "Scripts"),
        instance_groups=(CONTROLLER, WORKERS),
        **props,
    )


def test_hyperpod_cluster_takes_the_deployed_roles() -> None:
    stack = new_stack()
    cluster = _cluster(stack, deployed_roles={"controller": ROLE, "workers": ROLE})
    assert cluster.execution_roles["workers"] is cluster.controller_role
    found = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(".*GRP-DEPLOYED-ROLE.*"))
    assert len(found) == 1 and "group 'workers'" in str(found[0].entry.data)


def test_a_role_for_every_group_must_be_the_deployed_one() -> None:
    deployed = {"controller": ROLE, "workers": ROLE}
    same = new_stack()
    _cluster(same, role=iam.Role.from_role_arn(same, "Mine", ROLE), deployed_roles=deployed)  # no error
    other = new_stack()
    with pytest.raises(ConfigurationError) as error:
        _cluster(other, role=iam.Role.from_role_arn(other, "Mine", OWN), deployed_roles=deployed)
    assert [p.path for p in error.value.problems] == ["role", "role"]  # type: ignore[attr-defined]
    assert "group 'workers' is deployed with the execution role" in error.value.problems[1]
    assert KEEP_ROLE_QUOTE in error.value.problems[0]


# --- the bundled app -----------------------------------------------------------------------------------------------


@pytest.mark.slow  # handed out first (tests/conftest.py)
@pytest.mark.usefixtures("aws_env")
def test_the_app_keeps_the_deployed_groups_on_the_shared_role(tmp_path: Path) -> None:
    """``cdk deploy`` runs app.py: with credentials it reads the deployed roles (here moto's) into the template."""
    MotoCluster("roles", GROUPS).create()
    path = tmp_path / "roles.yaml"
    path.write_text(yaml.safe_dump(data(NEW_GROUP)))

    def synth_app(**context: str) -> dict[str, str]:
        out = tmp_path / f"out{len(context)}"
        return group_roles(synth_bundled_app(path, "hyperpod-roles", out, **context))

    found = synth_app()
    assert {g: found[g] for g in GROUPS} == {g: SHARED_ROLE_ID for g in GROUPS}
    assert found["gpu2"] != SHARED_ROLE_ID
    assert json.loads((tmp_path / "cdk.context.json").read_text()) == {KEY: {g: ROLE for g in GROUPS}}
    own = synth_app(execution_roles="config")  # a template that will not update a running cluster
    assert len(set(own.values())) == 4
