"""LifecycleScripts: the S3 prefix HyperPod runs on every node, with our runtime and parameters.

The prefix runs as root on every node, so who may write it matters as much as who may read it (security review M1):

* **Writers.** A new bucket's policy denies every object write and delete under the prefix to every principal but
  the upload's handler role (``aws:PrincipalArn``): an identity policy with ``s3:PutObject`` on ``*`` no longer
  reaches it. IAM: "aws:PrincipalArn: Use this key to compare the Amazon Resource Name (ARN) of the principal that
  made the request with the ARN that you specify in the policy. For IAM roles, the request context returns the ARN
  of the role, not the ARN of the user that assumed the role. [...] Availability - This key is always included in
  the request context." CloudFormation's execution role is not excepted: it writes no object (the handler does), and
  a principal that may edit the bucket policy (``s3:PutBucketPolicy``) can lift the statement anyway. The account's
  root user keeps the way back: S3's DeleteBucketPolicy reference, "the root principal in a bucket owner's AWS
  account can perform the GetBucketPolicy, PutBucketPolicy, and DeleteBucketPolicy API actions, even if their
  bucket policy explicitly denies the root principal's access."
* **Readers.** The nodes read the prefix only while the bucket belongs to the expected account
  (``aws:ResourceAccount``; IAM: "Use this key to compare the requested resource owner's AWS account ID with the
  resource account in the policy [...] For certain resources, such as Amazon S3 buckets, the resource ARN does not
  include the account ID"), so a bucket name that changed hands is not read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import jsii
from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct, IDependable, IValidation

from hyperpod_cdk.constructs.buckets import secure_bucket
from hyperpod_cdk.constructs.checks import check_props
from hyperpod_cdk.constructs.nag import acknowledge, acknowledge_wildcard_resource
from hyperpod_cdk.constructs.scanners import explain_deploy_time_handler
from hyperpod_cdk.core.config import LifecycleConfig
from hyperpod_cdk.core.errors import raise_if_any
from hyperpod_cdk.core.lifecycle_files import staged_assets
from hyperpod_cdk.model import DEFAULT_LIFECYCLE_PREFIX
from training_runtime.params import ProvisioningParameters
from training_runtime.users import USERS_FILE, User, dumps

LIFECYCLE_WRITE_ACTIONS = (
    "s3:PutObject*",
    "s3:DeleteObject*",
    "s3:ReplicateObject",
    "s3:ReplicateDelete",
    "s3:ReplicateTags",
)
"""Every S3 action that writes, deletes or re-tags an object under the prefix (``PutObject*`` covers the ACL,
tagging, retention and legal-hold writes; replication writes as its own role)."""
WRITERS_SID = "OnlyTheUploadWritesTheLifecyclePrefix"


class LifecycleSource(Protocol):
    """What :class:`HyperPodCluster` needs of a lifecycle prefix: :class:`LifecycleScripts` (uploaded by the
    stack at deploy) or ``PublishedLifecycleScripts`` (fixed at synth, uploaded by ``hyperpod-cdk publish``)."""

    bucket: s3.IBucket
    parameters: ProvisioningParameters | None

    @property
    def prefix(self) -> str: ...

    @property
    def s3_uri(self) -> str: ...

    @property
    def resolves_at_deploy(self) -> bool:
        """Whether the parameters file may hold CloudFormation values (resolved when it is uploaded)."""
        ...

    @property
    def upload_dependencies(self) -> Sequence[IDependable]:
        """What must exist before nodes read the prefix (the stack's upload, if it does one)."""
        ...

    def has_script(self, name: str) -> bool: ...

    def add_parameters(self, parameters: ProvisioningParameters) -> None: ...

    def add_users(self, users: Sequence[User]) -> None: ...

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant: ...


class LifecycleScripts(Construct):
    """An S3 prefix with HyperPod's lifecycle entry scripts, the node runtime and the cluster parameters.

    :param bucket: an existing bucket. Default: a new private, TLS-only, encrypted, versioned bucket that
        is retained when the stack is deleted.
    :param prefix: key prefix of the scripts; never empty, because the upload replaces the prefix's
        contents. Default: ``lifecycle/``.
    :param extra_assets: more files to upload under the prefix (e.g. a users file). Default: none.
    :param removal_policy: of a new bucket. Default: RETAIN.
    :param bucket_owner: the account ID that owns the bucket; the nodes read the prefix only from a bucket of this
        account (``aws:ResourceAccount``). Default: the stack's account.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        bucket: s3.IBucket | None = None,
        prefix: str = DEFAULT_LIFECYCLE_PREFIX,
        extra_assets: Sequence[s3deploy.ISource] = (),
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        bucket_owner: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        check_props(
            self,
            "LifecycleScripts",
            {"lifecycle"},
            lifecycle=LifecycleConfig.model_construct(
                prefix=prefix, bucket_name=bucket.bucket_name if bucket is not None else None
            ),
            paths={"lifecycle": ""},
        )
        self.prefix = prefix if prefix.endswith("/") else prefix + "/"
        self.bucket: s3.IBucket = bucket or secure_bucket(self, "Bucket", removal_policy=removal_policy)
        self.assets_dir = staged_assets()
        self.deployment = s3deploy.BucketDeployment(
            self,
            "Upload",
            destination_bucket=self.bucket,
            destination_key_prefix=self.prefix,
            sources=[s3deploy.Source.asset(str(self.assets_dir)), *extra_assets],
            memory_limit=512,
            # Keep the scripts when the stack goes: nodes being replaced may still read them.
            retain_on_delete=True,
        )
        self._acknowledge_upload_handler()
        self.bucket_owner = bucket_owner or Stack.of(self).account
        self.writers_restricted = self._deny_other_writers()
        """Whether the bucket's policy limits writes under the prefix (False: an existing bucket, whose policy is its
        owner's; docs/architecture.md, "The lifecycle prefix")."""
        self.parameters: ProvisioningParameters | None = None
        self.users: list[User] | None = None
        self.node.add_validation(ParametersAdded(self))

    @property
    def s3_uri(self) -> str:
        """``s3://bucket/prefix/``: HyperPod's ``LifeCycleConfig.SourceS3Uri``."""
        return f"s3://{self.bucket.bucket_name}/{self.prefix}"

    @property
    def resolves_at_deploy(self) -> bool:
        """The upload replaces CloudFormation values in the parameters file (e.g. the FSx DNS name)."""
        return True

    @property
    def upload_dependencies(self) -> Sequence[IDependable]:
        return [self.deployment]

    def has_script(self, name: str) -> bool:
        return (self.assets_dir / name).is_file()

    def add_parameters(self, parameters: ProvisioningParameters) -> None:
        """Upload the cluster's parameters file next to the scripts (once per prefix)."""
        if self.parameters is not None:
            raise_if_any(
                f"LifecycleScripts {self.node.path}",
                [
                    f"parameters: already set for cluster {self.parameters.cluster_name!r}; each cluster needs "
                    "its own LifecycleScripts (or prefix)"
                ],
            )
        self.parameters = parameters
        self.deployment.add_source(s3deploy.Source.json_data(parameters.file_name, parameters.to_json()))

    def add_users(self, users: Sequence[User]) -> None:
        """Upload the cluster's users file (names, fixed UIDs/GIDs, public keys; no secrets) for the runtime."""
        if self.users is not None:
            raise_if_any(f"LifecycleScripts {self.node.path}", ["users: the users file was already added"])
        self.users = list(users)
        if users:
            self.deployment.add_source(s3deploy.Source.data(USERS_FILE, dumps(list(users))))

    def _acknowledge_upload_handler(self) -> None:
        handler = self.deployment.handler_role.node.scope
        assert handler is not None
        explain_deploy_time_handler(handler)
        acknowledge(
            handler,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
            "CDK's BucketDeployment handler writes its logs with AWSLambdaBasicExecutionRole",
        )
        acknowledge(
            handler,
            "AwsSolutions-L1",
            "CDK pins the BucketDeployment handler's runtime; it moves forward with aws-cdk-lib",
        )
        for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:DeleteObject*", "s3:Abort*"):
            acknowledge(
                handler,
                f"AwsSolutions-IAM5[Action::{action}]",
                "CDK's BucketDeployment handler syncs the scripts from CDK's asset bucket to the prefix",
            )
        acknowledge_wildcard_resource(
            handler,
            f"{self.bucket.bucket_arn}/*",
            "CDK's BucketDeployment grant covers the destination bucket's objects",
        )
        stack = Stack.of(handler)  # a stack with an environment names its bootstrap bucket with it
        acknowledge_wildcard_resource(
            handler,
            f"arn:${{AWS::Partition}}:s3:::cdk-hnb659fds-assets-{stack.account}-{stack.region}/*",
            "CDK's BucketDeployment handler reads the uploaded asset from CDK's bootstrap bucket",
        )

    def _deny_other_writers(self) -> bool:
        """The bucket policy's Deny of writes under the prefix to everyone but the upload's handler role; the upload
        waits for it (a replaced handler role is named before it writes). False when the bucket is not this stack's."""
        added = self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid=WRITERS_SID,
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=list(LIFECYCLE_WRITE_ACTIONS),
                resources=[self.bucket.arn_for_objects(f"{self.prefix}*")],
                conditions={"ArnNotEquals": {"aws:PrincipalArn": self.deployment.handler_role.role_arn}},
            )
        )
        if added.policy_dependable is not None:
            self.deployment.node.add_dependency(added.policy_dependable)
        return added.statement_added

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """Read of the objects under the scripts' prefix while the bucket is ``bucket_owner``'s (CDK's
        ``grant_read`` also allows listing the whole bucket: ``s3:List*`` and ``s3:GetBucket*`` carry no prefix
        condition)."""
        grant = grant_prefix_read(self.bucket, grantee, self.prefix, self.bucket_owner)
        acknowledge_prefix_read(grantee, self.bucket, self.prefix)
        return grant


def grant_prefix_read(bucket: s3.IBucket, grantee: iam.IGrantable, prefix: str, owner: str) -> iam.Grant:
    """CDK's ``grant_read`` of ``prefix*``, each of its statements conditioned on the bucket's owner
    (``aws:ResourceAccount``)."""
    grant = bucket.grant_read(grantee, f"{prefix}*")
    for statement in grant.principal_statements:
        statement.add_condition("StringEquals", {"aws:ResourceAccount": owner})
    return grant


def acknowledge_prefix_read(grantee: iam.IGrantable, bucket: s3.IBucket, prefix: str) -> None:
    """The cdk-nag findings of ``bucket.grant_read(grantee, prefix + "*")``, acknowledged with their reason."""
    if isinstance(grantee, Construct):
        reason = "CDK's grant_read, limited to the lifecycle prefix"
        for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*"):
            acknowledge(grantee, f"AwsSolutions-IAM5[Action::{action}]", reason)
        acknowledge_wildcard_resource(grantee, f"{bucket.bucket_arn}/{prefix}*", reason)


@jsii.implements(IValidation)
class ParametersAdded:
    """Synth fails when nothing added the cluster parameters to a lifecycle prefix."""

    def __init__(self, scripts: LifecycleSource) -> None:
        self._scripts = scripts

    def validate(self) -> list[str]:
        if self._scripts.parameters is None:
            return [
                "LifecycleScripts has no cluster parameters, so nodes cannot bootstrap. Fix: pass it to a "
                "HyperPodCluster (which adds them) or call add_parameters()"
            ]
        return []
