"""``ssh-config``'s login pool block: when the cluster's stack has the login pool's outputs (``login_pool`` in the
config), a ``Host`` block that reaches the pool by its one name, directly over SSH (TCP 22 through the load balancer),
beside the SSM block of a node.

Every login node presents the pool's shared host keys, so the block names one ``HostKeyAlias``: ssh records and checks
the keys under that alias, whatever address the pool's name resolves to and whichever node answers, so a new or
replaced login node matches the one ``known_hosts`` entry (ssh_config(5): "HostKeyAlias Specifies an alias that should
be used instead of the real host name when looking up or saving the host key in the host key database files").
"""

from __future__ import annotations

import argparse
import re

from hyperpod_cdk.aws.clients import Aws
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.core.deployment import STACK_NAME_PREFIX
from hyperpod_cdk.core.stack_outputs import LOGIN_POOL_HOST_NAME
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.training_job import stack_outputs

HOST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
"""A DNS name as ssh_config may hold it (no spaces, quotes or patterns): what the stack's output is."""


def pool_alias(cluster: str) -> str:
    """The block's Host alias: ``<cluster>-pool`` (``<cluster>-login`` is the SSM alias of ``--group login``)."""
    return f"{cluster}-pool"


def host_key_alias(cluster: str) -> str:
    """The one name every login node's shared host key is kept under in ``known_hosts``."""
    return f"hyperpod-{cluster}-login-pool"


def pool_host_name(args: argparse.Namespace, ctx: OpsContext, cluster: str) -> str | None:
    """The login pool's name from the stack's outputs (``--stack``, default ``hyperpod-<cluster>``); None when the
    stack has no pool or cannot be read (ssh-config then writes the SSM block alone, as before the pool)."""
    from botocore.exceptions import BotoCoreError, ClientError

    stack = args.stack or f"{STACK_NAME_PREFIX}{cluster}"
    try:
        outputs = stack_outputs(Aws(ctx.session(args.profile, args.region)).client("cloudformation"), stack)
    except OpsError as error:
        if error.code == Exit.NOT_FOUND:
            return None
        raise
    except (ClientError, BotoCoreError) as error:  # no cloudformation:DescribeStacks: the SSM block still works
        ctx.out.print(f"note: could not read stack {stack}'s outputs ({error}); no login pool block")
        return None
    name = outputs.get(LOGIN_POOL_HOST_NAME)
    if not name:
        return None
    if not HOST_NAME.fullmatch(name):
        raise OpsError(f"stack {stack}'s {LOGIN_POOL_HOST_NAME} {name!r} is not a DNS name", Exit.FAILED)
    return name


def pool_block(cluster: str, host_name: str, args: argparse.Namespace) -> str:
    """The pool's Host block: the alias and the pool's own name, straight to the load balancer on 22."""
    alias = pool_alias(cluster)
    lines = [
        f"# BEGIN hyperpod-cdk {alias}",
        f"Host {alias} {host_name}",
        f"    HostName {host_name}",
        f"    HostKeyAlias {host_key_alias(cluster)}",
        f"    User {args.user}",
    ]
    if args.identity_file:
        lines.append(f"    IdentityFile {args.identity_file}")
    lines.append(f"# END hyperpod-cdk {alias}")
    return "\n".join(lines) + "\n"
