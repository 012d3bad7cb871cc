"""`connect`, `port-forward` and `ssh-config`: the exact aws ssm argv, handed to an injected executor."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from hyperpod_cdk.ops.context import run_process
from ops_support import MotoCluster, Operator, aws_env, moto_url  # noqa: F401

pytestmark = pytest.mark.usefixtures("aws_env")


def cluster() -> MotoCluster:
    return MotoCluster(
        "research",
        {"head": ("ml.m5.xlarge", 1, "Controller"), "gpu": ("ml.g5.8xlarge", 2, "Compute")},
    ).create()


def test_connect_starts_a_session_on_the_controller() -> None:
    made = cluster()
    operator = Operator()
    operator.exit_status = 0
    result = operator("connect", "research")
    assert result.code == 0, result.err
    head = made.ids["head"][0]
    assert operator.executed == [
        ["aws", "ssm", "start-session", "--target", f"sagemaker-cluster:{made.id}_head-{head}"]
    ]


def test_connect_passes_the_session_exit_status_and_profile_region() -> None:
    made = cluster()
    operator = Operator()
    operator.exit_status = 255
    node = made.ids["gpu"][1]
    result = operator("connect", "research", "--node", "ip-10-1-0-3", "--region", "us-west-2")
    assert result.code == 255
    assert operator.executed == [
        ["aws", "ssm", "start-session", "--target", f"sagemaker-cluster:{made.id}_gpu-{node}", "--region", "us-west-2"]
    ]


def test_connect_print_and_json_execute_nothing() -> None:
    made = cluster()
    operator = Operator()
    first_gpu = made.ids["gpu"][0]
    printed = operator("connect", "research", "--group", "gpu", "--print")
    assert printed.code == 0
    assert printed.out == f"aws ssm start-session --target sagemaker-cluster:{made.id}_gpu-{first_gpu}\n"
    report = operator("connect", "research", "--node", first_gpu, "--json").json()
    assert report["target"] == f"sagemaker-cluster:{made.id}_gpu-{first_gpu}"
    assert operator.executed == []


def test_connect_skips_nodes_that_are_not_running() -> None:
    made = cluster()
    made.node(made.ids["gpu"][0]).status = "Pending"
    operator = Operator()
    operator("connect", "research", "--group", "gpu")
    assert operator.executed[0][4].endswith(made.ids["gpu"][1])


def test_unknown_node_and_group() -> None:
    cluster()
    operator = Operator()
    missing = operator("connect", "research", "--node", "ip-10-9-9-9")
    assert missing.code == 3
    assert "has no node ip-10-9-9-9" in missing.err
    group = operator("connect", "research", "--group", "cpu")
    assert group.code == 3
    assert "no instance group 'cpu' (groups: head, gpu)" in group.err
    assert operator.executed == []


def test_port_forward_argv(tmp_path: Path) -> None:
    (tmp_path / "aws-config").write_text("[profile research]\nregion = us-west-2\n")
    (tmp_path / "aws-credentials").write_text("[research]\naws_access_key_id = a\naws_secret_access_key = b\n")
    made = cluster()
    operator = Operator()
    node = made.ids["gpu"][0]
    result = operator("port-forward", "research", "--node", node, "6006:16006", "--profile", "research")
    assert result.code == 0, result.err
    assert operator.executed == [
        [
            "aws",
            "ssm",
            "start-session",
            "--target",
            f"sagemaker-cluster:{made.id}_gpu-{node}",
            "--document-name",
            "AWS-StartPortForwardingSession",
            "--parameters",
            '{"portNumber":["16006"],"localPortNumber":["6006"]}',
            "--profile",
            "research",
        ]
    ]
    assert "http://localhost:6006" in result.err


def test_port_forward_rejects_bad_ports() -> None:
    cluster()
    operator = Operator()
    result = operator("port-forward", "research", "8888")
    assert (result.code, operator.executed) == (2, [])
    assert "give LOCAL:REMOTE" in result.err
    assert operator("port-forward", "research", "0:8888").code == 2


USER_CONFIG = """Host github.com
    User git

Host bastion
    HostName 203.0.113.7
"""


def test_ssh_config_writes_a_block_through_ssm_and_replaces_only_its_own(tmp_path: Path) -> None:
    made = cluster()
    config = tmp_path / ".ssh" / "config"
    config.parent.mkdir()
    config.write_text(USER_CONFIG)
    operator = Operator(home=tmp_path)
    result = operator("ssh-config", "research", "--identity-file", "~/.ssh/id_ed25519")
    assert result.code == 0, result.err
    text = config.read_text()
    head = made.ids["head"][0]
    proxy = (
        f"aws ssm start-session --target sagemaker-cluster:{made.id}_head-{head} "
        "--document-name AWS-StartSSHSession --parameters portNumber=%p"
    )
    assert text == USER_CONFIG + (
        "\n# BEGIN hyperpod-cdk research\n"
        "Host research\n"
        "    User ubuntu\n"
        "    IdentityFile ~/.ssh/id_ed25519\n"
        f"    ProxyCommand sh -c {shlex.quote(proxy)}\n"
        "# END hyperpod-cdk research\n"
    )
    # The controller is replaced: a second run points the same block at the new instance, in place.
    made.model.nodes.pop(head)
    with config.open("a") as stream:
        stream.write("\nHost later\n    User me\n")
    made.node(made.ids["gpu"][0]).instance_group_name = "head"
    assert operator("ssh-config", "research").code == 0
    again = config.read_text()
    assert again.count("# BEGIN hyperpod-cdk research") == 1
    assert head not in again
    assert f"_head-{made.ids['gpu'][0]} " in again
    assert again.startswith(USER_CONFIG)
    assert again.endswith("\nHost later\n    User me\n")
    assert operator.executed == []


def test_ssh_config_group_alias_new_file_is_private(tmp_path: Path) -> None:
    made = cluster()
    operator = Operator(home=tmp_path)
    assert operator("ssh-config", "research", "--group", "gpu", "--user", "alice").code == 0
    config = tmp_path / ".ssh" / "config"
    assert config.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / ".ssh").stat().st_mode & 0o777 == 0o700
    text = config.read_text()
    assert "Host research-gpu\n    User alice\n" in text
    assert f"_gpu-{made.ids['gpu'][0]} " in text
    # a second alias gets its own block next to the first
    assert operator("ssh-config", "research", "--host", "rs").code == 0
    assert config.read_text().count("# BEGIN hyperpod-cdk") == 2


def test_ssh_config_print_writes_nothing(tmp_path: Path) -> None:
    cluster()
    result = Operator(home=tmp_path)("ssh-config", "research", "--print")
    assert "AWS-StartSSHSession" in result.out
    assert not (tmp_path / ".ssh").exists()
    report = json.loads(Operator(home=tmp_path)("ssh-config", "research", "--json").out)
    assert report["host"] == "research"


def test_the_default_executor_names_a_missing_aws_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_cdk.aws.errors import OpsError

    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(OpsError, match="aws is not on PATH: install the AWS CLI v2 and the Session Manager plugin"):
        run_process(["aws", "ssm", "start-session", "--target", "x"])


POOL_NAME = "login.research.example.com"


def test_ssh_config_adds_the_login_pools_block_when_the_stack_has_one(tmp_path: Path) -> None:
    from hyperpod_cdk.core.stack_outputs import LOGIN_POOL_HOST_NAME
    from ops_support import stack_with_outputs

    cluster()
    stack_with_outputs("hyperpod-research", {LOGIN_POOL_HOST_NAME: POOL_NAME})
    operator = Operator(home=tmp_path)
    result = operator("ssh-config", "research", "--user", "alice")
    assert result.code == 0, result.err
    text = (tmp_path / ".ssh" / "config").read_text()
    pool = (
        "# BEGIN hyperpod-cdk research-pool\n"
        f"Host research-pool {POOL_NAME}\n"
        f"    HostName {POOL_NAME}\n"
        "    HostKeyAlias hyperpod-research-login-pool\n"
        "    User alice\n"
        "# END hyperpod-cdk research-pool\n"
    )
    assert text.endswith("\n" + pool)  # beside the SSM block of the controller
    assert text.count("# BEGIN hyperpod-cdk research\n") == 1 and "AWS-StartSSHSession" in text
    assert operator("ssh-config", "research", "--user", "alice").code == 0  # again: replaced in place
    assert (tmp_path / ".ssh" / "config").read_text() == text
    report = json.loads(Operator(home=tmp_path)("ssh-config", "research", "--json").out)
    assert (report["pool"]["host"], report["pool"]["host_name"]) == ("research-pool", POOL_NAME)


def test_ssh_config_without_a_pool_or_a_stack_writes_the_ssm_block_alone(tmp_path: Path) -> None:
    from ops_support import stack_with_outputs

    cluster()
    result = Operator(home=tmp_path)("ssh-config", "research", "--print")
    assert result.code == 0 and "HostKeyAlias" not in result.out  # no stack at all
    stack_with_outputs("other", {"ClusterName": "research"})
    result = Operator(home=tmp_path)("ssh-config", "research", "--stack", "other", "--print")
    assert result.code == 0 and "HostKeyAlias" not in result.out  # a stack without a pool
    report = json.loads(Operator(home=tmp_path)("ssh-config", "research", "--json").out)
    assert report["pool"] is None


def test_ssh_config_refuses_a_pool_name_that_is_not_a_dns_name(tmp_path: Path) -> None:
    from hyperpod_cdk.core.stack_outputs import LOGIN_POOL_HOST_NAME
    from ops_support import stack_with_outputs

    cluster()
    stack_with_outputs("hyperpod-research", {LOGIN_POOL_HOST_NAME: "a b\n    ProxyCommand x"})
    result = Operator(home=tmp_path)("ssh-config", "research")
    assert result.code != 0 and "not a DNS name" in result.err
    assert not (tmp_path / ".ssh" / "config").exists()


def test_ssh_config_refused_the_stack_writes_the_ssm_block_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """grant_connect gives no cloudformation:DescribeStacks: the SSM block still works, and the note says why."""
    from botocore.exceptions import ClientError

    from hyperpod_cdk.ops import pool_ssh

    def refused(*_: object) -> dict[str, str]:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "DescribeStacks")

    monkeypatch.setattr(pool_ssh, "stack_outputs", refused)
    cluster()
    result = Operator(home=tmp_path)("ssh-config", "research")
    assert result.code == 0, result.err
    assert "no login pool block" in result.out
    text = (tmp_path / ".ssh" / "config").read_text()
    assert "AWS-StartSSHSession" in text and "HostKeyAlias" not in text
