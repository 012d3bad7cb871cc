"""``hyperpod-cdk login drain|undrain NODE``: the node is looked up first (an unknown one, or a controller, is refused
before any session), the command sent to it through SSM is one of two fixed strings (the NODE argument never in it),
and the node's answer is reported; a failure names the node and its exit status."""

from __future__ import annotations

import json

import pytest

from hyperpod_cdk.ops.context import Captured
from hyperpod_cdk.ops.login import node_command
from ops_support import MotoCluster, Operator, aws_env, moto_url  # noqa: F401


@pytest.fixture
def cluster(aws_env: str) -> MotoCluster:  # noqa: F811
    groups = {"controller": ("ml.m5.xlarge", 1, "Controller"), "login": ("ml.m5.large", 2, "Login")}
    return MotoCluster("ml", groups).create()


def node_says(code: int, line: str) -> Operator:
    return Operator(
        ssm_command=lambda argv: Captured(0, f"### hyperpod-cdk begin\n{line}\n### hyperpod-cdk exit {code}\n", "")
    )


def sent(operator: Operator) -> tuple[str, str]:
    (argv,) = operator.captured
    return argv[argv.index("--target") + 1], json.loads(argv[argv.index("--parameters") + 1])["command"][0]


def test_drain_runs_the_nodes_own_command_as_root_on_that_node(cluster: MotoCluster) -> None:
    node = cluster.ids["login"][1]
    operator = node_says(0, json.dumps({"changed": True, "drained": True}))
    result = operator("login", "drain", "ml", node, "--json")
    assert result.code == 0, result.err
    assert result.json() == {"cluster": "ml", "node": node, "group": "login", "changed": True, "drained": True}
    target, command = sent(operator)
    assert target.endswith(f"_login-{node}") and "sudo -n /opt/hyperpod-cdk/bin/login-pool drain;" in command
    assert node not in command


def test_undrain_says_when_nothing_changed(cluster: MotoCluster) -> None:
    operator = node_says(0, json.dumps({"changed": False, "drained": False}))
    result = operator("login", "undrain", "ml", cluster.ids["login"][0])
    assert result.code == 0 and "back in the pool" in result.out and "already" in result.out
    assert "login-pool undrain" in sent(operator)[1]


def test_an_unknown_node_or_a_controller_is_refused_before_any_session(cluster: MotoCluster) -> None:
    operator = Operator()
    unknown = operator("login", "drain", "ml", "i-0abc; reboot")
    assert unknown.code == 3 and "has no node i-0abc; reboot" in unknown.err
    controller = operator("login", "drain", "ml", cluster.ids["controller"][0])
    assert controller.code == 5 and "controller group" in controller.err
    assert operator.captured == []


def test_a_node_without_the_pool_fails_with_its_exit_status(cluster: MotoCluster) -> None:
    result = node_says(1, "sudo: /opt/hyperpod-cdk/bin/login-pool: command not found")(
        "login", "drain", "ml", cluster.ids["login"][0]
    )
    assert result.code == 1 and "exited 1" in result.err and "login_pool" in result.err


def test_only_the_two_fixed_commands_exist() -> None:
    assert node_command("drain") == "sudo -n /opt/hyperpod-cdk/bin/login-pool drain"
    with pytest.raises(ValueError):
        node_command("drain; id")
