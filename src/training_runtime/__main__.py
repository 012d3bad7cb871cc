"""``python3 -m training_runtime {plan,bootstrap,status,validate}``: what the lifecycle scripts run on
every node.

* ``validate`` checks the parameters file and the resource config and names this node's group.
* ``plan`` prints the steps this node would run and what each would change; it changes nothing.
* ``bootstrap`` applies the plan; a second run changes nothing. The done marker is written last.
* ``status`` shows each step's last result and whether the node still matches it.

Inputs are checked before anything on the node changes; a problem exits with status 2 and one line
naming what failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from training_runtime.directory_sync import main as directory_sync_main
from training_runtime.errors import InputError, StepFailed
from training_runtime.files import HolderLock
from training_runtime.groups import CONTROLLER
from training_runtime.health import main as health_main
from training_runtime.launch import main as launch_main
from training_runtime.log import FAILURE_MARKER, log
from training_runtime.login_pool.cli import main as login_main
from training_runtime.node import HYPERPOD, Host, Node, platform_at
from training_runtime.params import (
    API_DRIVEN,
    LIFECYCLE_DRIVEN,
    PARAMETERS_FILE_BY_MODE,
    ParametersError,
    ProvisioningParameters,
)
from training_runtime.paths import RESOURCE_CONFIG_PATH, STATE_DIR
from training_runtime.plan import StepError, apply_plan, describe_plan, step_status
from training_runtime.resources import ResourceConfig, ResourceConfigError
from training_runtime.rest.cli import main as rest_main
from training_runtime.retry import NotReady, RetryPolicy
from training_runtime.run import CommandError, Runner
from training_runtime.scaler.cli import main as scaler_main
from training_runtime.steps.catalog import steps_for
from training_runtime.users import load_users

FAILED = 2

TOOLS: Dict[str, Callable[[List[str]], int]] = {
    "launch": launch_main,
    "health": health_main,
    "scaler": scaler_main,
    "rest": rest_main,
    "directory-sync": directory_sync_main,
    "login": login_main,
}
"""Commands for after the boot, each with its own options: ``launch`` (the training launcher),
``health`` (the checks Slurm runs as HealthCheckProgram and Prolog), ``scaler`` (the capacity scaler service on
the controller, :mod:`training_runtime.scaler.cli`), ``rest`` (the REST API's endpoint and key refresh on the
controller, :mod:`training_runtime.rest.cli`), ``directory-sync`` (the controller's directory group sync,
:mod:`training_runtime.directory_sync`) and ``login`` (a login pool node's drain marker and health endpoint,
:mod:`training_runtime.login_pool.cli`)."""


PARAMETERS_FILES = (PARAMETERS_FILE_BY_MODE[API_DRIVEN], PARAMETERS_FILE_BY_MODE[LIFECYCLE_DRIVEN])
"""Where the parameters are, in order of precedence: ours first. In API-driven mode HyperPod's own
provisioning_parameters.json may also be in the prefix (AWS's migration guide says to remove it); when both
exist, the runtime reads hyperpod_cdk_parameters.json."""


def find_parameters(directory: Path) -> Path:
    for name in PARAMETERS_FILES:
        if (directory / name).is_file():
            return directory / name
    raise ParametersError(
        [
            "no parameters file in {} (looked for {}). Fix: deploy the lifecycle prefix with the "
            "hyperpod-cdk LifecycleScripts construct".format(directory, ", ".join(PARAMETERS_FILES))
        ]
    )


def own_ips() -> List[str]:
    """This node's addresses (``hostname -I``); empty when they cannot be read."""
    try:
        return Runner().run(["hostname", "-I"], timeout=10, check=False).stdout.split()
    except CommandError:
        return []


STALE_COPY = (
    "a worker's copy can be stale: AWS's field notes (hyperpod-mental-model.md) say \"workers may show instance "
    "groups that have since been scaled to 0. The controller's view is the most current.\""
)


def load_node(args: argparse.Namespace, host: Optional[Host] = None) -> Node:
    """Read and check every input; raises :class:`InputError` naming all problems.

    The node finds itself in the resource config by address, else by host name. Groups the parameters file
    does not have are an error on a controller (its copy is current: the files disagree) and on the generic
    platform, and are ignored, with a warning, on HyperPod's other nodes: a worker's copy can be stale
    (docs/node-runtime.md, "Stale copies on workers")."""
    host = host or Host()
    params = ProvisioningParameters.loads(find_parameters(args.assets_dir).read_text())
    resources = ResourceConfig.load(args.resource_config)
    missing = [g for g in resources.groups if params.group(g) is None]
    unknown_groups = (
        "InstanceGroups: {} not in the parameters file (groups there: {}). Fix: deploy the lifecycle prefix and the "
        "cluster from the same config".format(missing, [g.name for g in params.groups])
    )
    try:
        instance = resources.find_self(args.ip or own_ips(), host.hostname())
    except ResourceConfigError as error:
        raise ResourceConfigError(([unknown_groups] if missing else []) + error.problems) from None
    group = params.group(instance.group)
    warnings = []
    # Only HyperPod's workers have stale copies; on the generic platform every node renders slurm.conf from its own.
    if missing and group is not None and group.role != CONTROLLER and platform_at(args.root) == HYPERPOD:
        warnings.append(
            "resource config: ignored groups {} that the parameters file does not have ({})".format(missing, STALE_COPY)
        )
        resources = resources.without(missing)
    elif missing:
        raise ResourceConfigError([unknown_groups])
    assert group is not None
    load_users(args.assets_dir)
    return Node(
        params=params,
        resources=resources,
        group=group,
        instance=instance,
        assets_dir=args.assets_dir,
        root=args.root,
        host=host,
        warnings=tuple(warnings),
    )


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in TOOLS:
        return TOOLS[argv[0]](argv[1:])
    parser = argparse.ArgumentParser(prog="python3 -m training_runtime")
    parser.add_argument("command", choices=["bootstrap", "plan", "status", "validate"])
    parser.add_argument("--assets-dir", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument(
        "--resource-config",
        type=Path,
        default=Path(os.environ.get("SAGEMAKER_RESOURCE_CONFIG_PATH", RESOURCE_CONFIG_PATH)),
    )
    parser.add_argument("--ip", action="append", default=[], help="this node's IP (default: from hostname -I)")
    parser.add_argument("--json", action="store_true", help="plan/status: one JSON object per step")
    parser.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        node = load_node(args)
    except InputError as error:
        return fail("inputs", error)
    log(
        "node",
        cluster=node.params.cluster_name,
        group=node.group.name,
        role=node.role,
        instance=node.instance.name,
        platform=node.platform,
        mode=node.params.mode,
        slurm_name=node.slurm_name,
        naming=node.naming.mode,
        naming_source=node.naming.source,
    )
    for note in node.notes:
        log("warning", message=note)
    if args.command == "validate":
        return 0
    try:
        steps = steps_for(node)
        if args.command == "plan":
            if not args.json:
                for note in node.notes:
                    print("warning: " + note)
            show(describe_plan(node, steps), args.json)
            return 0
        if args.command == "status":
            show(step_status(node, steps), args.json)
            return 0
        with BootstrapLock(node):
            changed = apply_plan(node, steps)
    except StepError as error:
        return fail(error.step, error)
    except (StepFailed, CommandError, InputError, OSError) as error:
        return fail("plan", error)
    log("done", steps=len(steps), changed=changed)
    return 0


LOCK_WAIT = RetryPolicy(attempts=None, base_s=1.0, cap_s=10.0, deadline_s=1800.0)
"""How long a bootstrap waits for an earlier one on the same node: 30 minutes, then it fails clearly."""


class BootstrapLock:
    """One bootstrap at a time on a node. HyperPod may re-run a script while an old run hangs: the new run
    waits for the lock up to :data:`LOCK_WAIT`'s deadline, then fails naming the holder, instead of hanging
    behind it forever."""

    def __init__(self, node: Node, wait: RetryPolicy = LOCK_WAIT) -> None:
        self.lock = HolderLock(node.path(STATE_DIR + "/bootstrap.lock"))
        self.wait = wait

    def __enter__(self) -> None:
        self.lock.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.lock.take(self.wait, what="the bootstrap lock")
        except NotReady:
            holder = self.lock.holder() or "unknown"
            raise StepFailed(
                "another bootstrap (pid {}) has held {} for {:.0f} s or more; it may hang. Fix: find it with "
                "`ps -fp {}`, stop it if it is stuck, and re-run".format(
                    holder, self.lock.path, self.wait.deadline_s, holder
                )
            ) from None
        self.lock.record(str(os.getpid()))

    def __exit__(self, *exc: Any) -> None:
        self.lock.release()


def fail(name: str, error: BaseException) -> int:
    log("failed", step=name, error=str(error))
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if isinstance(error, InputError) and error.problems:
        more = len(error.problems) - 1
        first = "{}: {}{}".format(error.subject, error.problems[0], " (and {} more)".format(more) if more else "")
    sys.stderr.write("{} at {}: {}\n".format(FAILURE_MARKER, name, first))
    if isinstance(error, InputError):
        for problem in error.problems[:20]:
            sys.stderr.write("  - {}\n".format(problem))
    sys.stderr.flush()
    return FAILED


def show(rows: List[Any], as_json: bool) -> None:
    for row in rows:
        if as_json:
            print(json.dumps(row, sort_keys=True))
            continue
        if "actions" in row:
            print("{:<28} {}".format(row["step"], "WILL CHANGE" if row["needed"] else "ok"))
            for action in row["actions"]:
                print("    - " + action)
            for line in row.get("left_alone", []):
                print("    = left alone: " + line)
        else:
            print(
                "{:<28} {:<10} {}".format(row["step"], row["last_result"], "in sync" if row["in_sync"] else "DRIFTED")
            )


if __name__ == "__main__":
    sys.exit(main())
