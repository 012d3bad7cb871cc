"""Fakes for the node runtime's unit tests: a recording runner and a node on a fake root."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable, List, Optional

from training_runtime.emulation import Emulation
from training_runtime.groups import GroupSpec
from training_runtime.node import Host, Node
from training_runtime.params import ProvisioningParameters
from training_runtime.resources import ResourceConfig
from training_runtime.retry import RetryPolicy
from training_runtime.run import CommandError, Result, Runner
from training_runtime.services import Daemon

Responder = Callable[[List[str]], Optional[Result]]  # evaluated at import: typing generics for Python 3.8


class RecordingRunner(Runner):
    """Records every command instead of running it.

    ``respond`` maps an argv prefix (a tuple of leading words) to a return code and stdout; commands with
    no matching prefix succeed with empty output. The longest matching prefix wins.
    """

    def __init__(self, respond: Mapping[tuple[str, ...], tuple[int, str]] | None = None) -> None:
        self.commands: list[list[str]] = []
        self.respond = dict(respond or {})
        self.hooks: list[Callable[[List[str]], None]] = []
        """Called with every command after it is recorded (e.g. a daemon writing its pid file)."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 300.0,
        check: bool = True,
        env: Any = None,
        input: str | None = None,
        secret_output: bool = False,
    ) -> Result:
        argv = list(argv)
        self.commands.append(argv)
        for hook in self.hooks:
            hook(argv)
        matches = [p for p in self.respond if tuple(argv[: len(p)]) == p]
        code, out = self.respond[max(matches, key=len)] if matches else (0, "")
        result = Result(argv, code, out, "")
        if check and code != 0:
            raise CommandError(argv, code, out)
        return result

    def ran(self, *prefix: str) -> list[list[str]]:
        """The recorded commands that start with ``prefix``."""
        return [c for c in self.commands if tuple(c[: len(prefix)]) == prefix]


CLUSTER_GROUPS = (
    GroupSpec("controller", "controller", "ml.m5.xlarge"),
    GroupSpec("login", "login", "ml.m5.large"),
    GroupSpec("workers", "compute", "ml.trn1.32xlarge", "trn"),
)


def resource_config(
    groups: Mapping[str, Sequence[tuple[str, ...]]], instance_types: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """HyperPod's resource_config.json shape: group name -> [(InstanceName, CustomerIpAddress[, InstanceType])],
    with each group's ``InstanceType`` where ``instance_types`` names it."""
    types = instance_types or {}
    return {
        "ClusterConfig": {"ClusterName": "test", "ClusterArn": "arn:aws:sagemaker:us-east-1:111122223333:cluster/x"},
        "InstanceGroups": [
            {
                "Name": name,
                **({"InstanceType": types[name]} if name in types else {}),
                "Instances": [
                    {"InstanceName": i[0], "CustomerIpAddress": i[1], **({"InstanceType": i[2]} if i[2:] else {})}
                    for i in instances
                ],
            }
            for name, instances in groups.items()
        ],
    }


DEFAULT_INSTANCES = {
    "controller": [("controller-1", "10.1.0.10")],
    "login": [("login-1", "10.1.0.5")],
    "workers": [("workers-1", "10.1.0.11"), ("workers-2", "10.1.0.12")],
}


class FakeHost(Host):
    """The machine as a fake-root test sees it: the instance's host name; accounts resolve to the IDs given,
    else to the test process's own (so ownership is applied and checked without real users); daemons get
    one look at their pid file (a test that starts one writes it, see :func:`running_daemon`)."""

    daemon_wait = RetryPolicy(attempts=1, base_s=0.0, cap_s=0.0, deadline_s=0.0)
    controller_wait = RetryPolicy(attempts=1, base_s=0.0, cap_s=0.0, deadline_s=0.0)

    def __init__(
        self, hostname: str, accounts: Mapping[str, tuple[int, int]] | None = None, ec2_type: str | None = None
    ) -> None:
        self.name = hostname
        self.accounts = dict(accounts or {})
        self.looked_up: List[str] = []
        self.ec2_type = ec2_type

    def ids(self, owner: str, group: Optional[str]) -> tuple[int, int]:
        self.looked_up.append(owner)
        uid, gid = self.accounts.get(owner, (os.getuid(), os.getgid()))
        if group is not None:
            gid = self.accounts.get(group, (uid, os.getgid()))[1]
        return uid, gid

    def group_id(self, name: str) -> Optional[int]:
        """The gid the accounts give ``name`` (its second ID), else none: no group of the test machine counts."""
        return self.accounts[name][1] if name in self.accounts else None

    def hostname(self) -> str:
        return self.name

    def instance_type(self) -> Optional[str]:
        """EC2 instance metadata's answer: the type given, else none (never the network)."""
        return self.ec2_type


def fake_node(
    root: Path,
    *,
    instance: str = "workers-1",
    options: Mapping[str, Any] | None = None,
    groups: Sequence[GroupSpec] = CLUSTER_GROUPS,
    instances: Mapping[str, Sequence[tuple[str, ...]]] = DEFAULT_INSTANCES,
    fsx: bool = True,
    mode: str = "lifecycle-driven",
    runner: RecordingRunner | None = None,
    params: ProvisioningParameters | None = None,
    host: Host | None = None,
    instance_types: Mapping[str, str] | None = None,
    emulation: Emulation | None = None,
) -> Node:
    """A node of a small cluster whose root is the directory ``root`` (created if needed).

    ``params`` replaces the parameters built from ``options``, ``groups``, ``fsx`` and ``mode`` (for a
    parameters file the constructs wrote)."""
    root.mkdir(parents=True, exist_ok=True)
    if params is None:
        params = ProvisioningParameters(
            cluster_name="test",
            mode=mode,
            groups=tuple(groups),
            fsx_dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com" if fsx else None,
            fsx_mountname="abcdefgh" if fsx else None,
            options=dict(options or {}),
            emulation=emulation,
        )
    resources = ResourceConfig.from_json(json.loads(json.dumps(resource_config(instances, instance_types))))
    me = next(i for i in resources.all_instances() if i.name == instance)
    group = params.group(me.group)
    assert group is not None
    return Node(
        params=params,
        resources=resources,
        group=group,
        instance=me,
        assets_dir=root / "assets",
        root=root,
        runner=runner or RecordingRunner(),
        retry=RetryPolicy(attempts=2, base_s=0.0, cap_s=0.0, deadline_s=1.0),
        host=host or FakeHost(me.name),
    )


def running_daemon(node: Node, daemon: Daemon, pid: int = 4242) -> None:
    """When ``daemon``'s start command runs on ``node``, it writes its pid file and its /proc entry (as the
    forking daemon would), so services.start's wait sees it come up."""
    runner = node.runner
    assert isinstance(runner, RecordingRunner)

    def start(argv: List[str]) -> None:
        if argv == list(daemon.argv):
            touch(node.root, daemon.pid_file, f"{pid}\n")
            touch(node.root, f"/proc/{pid}/comm", daemon.name[:15] + "\n")

    runner.hooks.append(start)


def touch(root: Path, path: str, content: str = "") -> Path:
    """Create ``path`` (absolute, on the node) under ``root`` with ``content``."""
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content)
    return target
