"""``rest rotate-key``: a new signing key for the cluster's REST API, in use on the controller at once.

Secrets Manager generates the key (``GetRandomPassword``: 64 letters and digits, as at creation) and keeps it as the
secret's new ``AWSCURRENT`` version (``PutSecretValue``); the old one becomes ``AWSPREVIOUS``. The minting function
reads ``AWSCURRENT`` on every call, so the next token is signed with the new key; the controller installs it and
has slurmctld and slurmdbd load it (its ``rest-key-refresh``, which its timer also runs every five minutes), run
here through SSM so that the two change together. Tokens signed with the old key are refused from then on; running
jobs are not touched (they authenticate with munge). The key passes through this process's memory only: never argv,
a file or the output.
"""

from __future__ import annotations

import argparse
import json

from hyperpod_cdk.aws.clients import Aws
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.core.deployment import STACK_NAME_PREFIX
from hyperpod_cdk.core.rest_api_config import KEY_LENGTH
from hyperpod_cdk.core.stack_outputs import CLUSTER_NAME, REST_API_KEY_SECRET
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.controller_shell import ControllerShell
from hyperpod_cdk.ops.lookup import get_cluster, list_nodes, pick_node
from hyperpod_cdk.ops.render import to_json
from hyperpod_cdk.ops.training_job import stack_outputs

REFRESH_TIMEOUT_S = 120.0


def refresh_command() -> str:
    """The controller's key refresh, as root (the runtime installs it: training_runtime.steps.rest_service)."""
    from training_runtime.steps.rest_service import REFRESH_PROGRAM

    return f"sudo -n {REFRESH_PROGRAM}"


def rotate_key(args: argparse.Namespace, ctx: OpsContext) -> int:
    aws = Aws(ctx.session(args.profile, args.region))
    stack = args.stack or f"{STACK_NAME_PREFIX}{args.cluster}"
    outputs = stack_outputs(aws.client("cloudformation"), stack)
    secret = outputs.get(REST_API_KEY_SECRET)
    if not secret:
        missing = f"stack {stack} has no output {REST_API_KEY_SECRET}: is rest_api enabled and deployed?"
        raise OpsError(missing, Exit.NOT_FOUND)
    if args.dry_run:
        ctx.write(to_json({"secret": secret, "rotated": False}) if args.json else f"would rotate {secret}")
        return Exit.OK
    secrets = aws.client("secretsmanager")
    value = secrets.get_random_password(PasswordLength=KEY_LENGTH, ExcludePunctuation=True, IncludeSpace=False)
    version = secrets.put_secret_value(SecretId=secret, SecretString=value["RandomPassword"])["VersionId"]
    del value
    result: dict[str, object] = {"secret": secret, "version": version, "rotated": True}
    if not args.no_refresh:
        cluster = get_cluster(aws.sagemaker, outputs.get(CLUSTER_NAME) or args.cluster)
        controller = pick_node(cluster, list_nodes(aws.sagemaker, cluster.name), None, None)
        shell = ControllerShell(args, ctx, cluster.ssm_target(controller), timeout=REFRESH_TIMEOUT_S)
        answer = shell.run(refresh_command())
        lines = [line for line in answer.output.splitlines() if line.startswith("{")]
        result["controller"] = json.loads(lines[-1]) if lines else answer.output.strip()
        if answer.code != 0:
            result["controller_exit"] = answer.code
            ctx.write(to_json(result))
            raise OpsError(
                f"the key was rotated (version {version}) but the controller's refresh exited {answer.code}: its timer "
                "installs the key within five minutes; until then new tokens are refused",
                Exit.FAILED,
            )
    ctx.write(to_json(result) if args.json else f"rotated {secret}: version {version}")
    return Exit.OK
