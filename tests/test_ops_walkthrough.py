"""The walkthrough in docs/deploying.md ("From deploy to a running job"), command by command, against moto."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from clock import ago_ms
from hyperpod_cdk.aws.session import make_session
from ops_support import MotoCluster, Operator, aws_env, moto_url  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent


def walkthrough() -> list[list[str]]:
    text = (ROOT / "docs" / "deploying.md").read_text()
    section = text.split("## From deploy to a running job\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    assert block, "the walkthrough's sh block"
    lines = [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("hyperpod-cdk ")]


@pytest.mark.usefixtures("aws_env")
@pytest.mark.calendar
def test_the_readme_walkthrough_runs(tmp_path: Path) -> None:
    commands = walkthrough()
    assert [c[0] for c in commands] == ["wait", "status", "logs", "ssh-config", "connect", "training-job-config"]
    # what `cdk deploy` leaves: a cluster that is still being created, its log group, the stack's outputs
    made = MotoCluster(
        "my-cluster",
        {
            "controller": ("ml.m5.xlarge", 1, "Controller"),
            "login": ("ml.m5.xlarge", 1, "Login"),
            "gpu": ("ml.g5.8xlarge", 2, "Compute"),
        },
    ).create()
    made.set(status="Creating")
    login = made.ids["login"][0]
    session = make_session(None, None)
    logs = session.client("logs")
    group = f"/aws/sagemaker/Clusters/my-cluster/{made.id}"
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName=f"LifecycleConfig/login/{login}")
    logs.put_log_events(
        logGroupName=group,
        logStreamName=f"LifecycleConfig/login/{login}",
        logEvents=[{"timestamp": ago_ms(60), "message": "bootstrap: done"}],
    )
    outputs = {
        "ClusterName": "my-cluster",
        "TrainingJobSubnetIds": "subnet-0aaa",
        "TrainingJobSecurityGroupIds": "sg-0bbb",
        "FsxFileSystemId": "fs-0ccc",
        "FsxMountName": "abcdefgh",
    }
    template = {
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    session.client("cloudformation").create_stack(StackName="hyperpod-my-cluster", TemplateBody=json.dumps(template))

    operator = Operator(home=tmp_path)
    operator.sleep = lambda seconds: made.set(status="InService")
    results = {}
    for argv in commands:
        result = operator(*argv)
        assert result.code == 0, (argv, result.err)
        results[argv[0]] = result
    assert "InService" in results["wait"].out
    assert "ip-10-1-0-2" in results["status"].out
    assert results["logs"].out.rstrip().endswith(f"login/{login} bootstrap: done")
    assert "Host my-cluster-login" in (tmp_path / ".ssh" / "config").read_text()
    assert operator.executed == [
        ["aws", "ssm", "start-session", "--target", f"sagemaker-cluster:{made.id}_login-{login}"]
    ]
    assert '"DirectoryPath": "/abcdefgh/datasets"' in results["training-job-config"].out
