#!/usr/bin/env python3
"""Write the ``plan`` example of docs/node-runtime.md from the runtime itself.

The inputs are what the stack uploads for ``examples/cpu-cluster.yaml`` (its parameters and users snapshots,
``tests/snapshots/cpu-cluster.*.json``, with each deploy-time value replaced by an example) and a resource
config of its four instances. The plan is the one ``python3 -m training_runtime plan`` prints for the first
worker on a fresh generic (Debian) machine: an empty root, and a machine that answers every command it is
asked as a fresh one would (nothing installed, nothing running: every command fails with no output), so the
example does not depend on where it is generated. The block between
``<!-- BEGIN GENERATED: plan-example -->`` and ``<!-- END GENERATED -->`` is rewritten::

    .venv/bin/python scripts/gen_plan_example.py          # rewrite the block
    .venv/bin/python scripts/gen_plan_example.py --check  # exit 1 if the committed copy is stale

No CDK import: the node runtime only (stdlib).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # docgen, when a test loads this file by path
sys.path.insert(0, str(ROOT / "src"))

import docgen  # noqa: E402

from training_runtime.__main__ import show  # noqa: E402
from training_runtime.node import Host, Node  # noqa: E402
from training_runtime.params import ProvisioningParameters  # noqa: E402
from training_runtime.plan import describe_plan  # noqa: E402
from training_runtime.resources import ResourceConfig  # noqa: E402
from training_runtime.retry import RetryPolicy  # noqa: E402
from training_runtime.run import CommandError, Result, Runner  # noqa: E402
from training_runtime.steps.catalog import steps_for  # noqa: E402
from training_runtime.users import USERS_FILE  # noqa: E402

DOC = ROOT / "docs" / "node-runtime.md"
SNAPSHOTS = ROOT / "tests" / "snapshots"
BEGIN = "<!-- BEGIN GENERATED: plan-example -->"
END = "<!-- END GENERATED -->"
MARKER = re.compile(r"<<marker:0xbaba:\d+>>")

DEPLOY_TIME = {
    "fsx_dns_name": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
    "fsx_mountname": "abcdefgh",
    "remote_write_url": "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0123/api/v1/remote_write",
    "region": "us-west-2",
}
"""What each deploy-time value of the snapshot stands for in the example."""

INSTANCES = {
    "controller-machine": [("controller-machine-1", "10.1.0.10")],
    "login-group": [("login-group-1", "10.1.0.5")],
    "worker-group-1": [("worker-group-1-1", "10.1.0.12"), ("worker-group-1-2", "10.1.0.13")],
}
PLANNED = "worker-group-1-1"


class FreshMachine(Runner):
    """A machine with nothing installed or running: every command fails with no output, and none is run."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 0.0,
        check: bool = True,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        secret_output: bool = False,
    ) -> Result:
        if check:
            raise CommandError(list(argv), 1, "")
        return Result(list(argv), 1, "", "")


class ExampleHost(Host):
    """The planned instance's host name; every account root's (the plan only reads IDs)."""

    daemon_wait = RetryPolicy(attempts=1, base_s=0.0, cap_s=0.0, deadline_s=0.0)

    def ids(self, owner: str, group: str | None) -> tuple[int, int]:
        return 0, 0

    def hostname(self) -> str:
        return PLANNED

    def instance_type(self) -> str | None:
        return None


def deploy_values(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {name: deploy_values(item, name) for name, item in value.items()}
    if isinstance(value, list):
        return [deploy_values(item, key) for item in value]
    if isinstance(value, str) and MARKER.search(value):
        return MARKER.sub(DEPLOY_TIME[key], value)
    return value


def snapshot(kind: str) -> Any:
    (entry,) = json.loads((SNAPSHOTS / f"cpu-cluster.{kind}.json").read_text()).values()
    return entry


def resource_config() -> dict[str, Any]:
    return {
        "InstanceGroups": [
            {"Name": group, "Instances": [{"InstanceName": n, "CustomerIpAddress": ip} for n, ip in instances]}
            for group, instances in INSTANCES.items()
        ]
    }


def plan_text() -> str:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "root"
        (root / "fsx").mkdir(parents=True)
        assets = Path(scratch) / "assets"
        assets.mkdir()
        params = ProvisioningParameters.loads(json.dumps(deploy_values(snapshot("parameters")["content"])))
        (assets / USERS_FILE).write_text(json.dumps(snapshot("users")))
        resources = ResourceConfig.from_json(resource_config())
        instance = next(i for i in resources.all_instances() if i.name == PLANNED)
        group = params.group(instance.group)
        assert group is not None
        node = Node(
            params=params,
            resources=resources,
            group=group,
            instance=instance,
            assets_dir=assets,
            root=root,
            runner=FreshMachine(),
            retry=RetryPolicy(attempts=1, base_s=0.0, cap_s=0.0, deadline_s=0.0),
            host=ExampleHost(),
        )
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            show(describe_plan(node, steps_for(node)), as_json=False)
        return out.getvalue().replace(scratch, "<scratch>")


def block() -> str:
    return f"{BEGIN}\n```\n{plan_text()}```\n{END}"


def updated(text: str) -> str:
    return docgen.replace_block(text, BEGIN, END, block())


if __name__ == "__main__":
    sys.exit(docgen.main(DOC, lambda: updated(DOC.read_text()), __doc__))
