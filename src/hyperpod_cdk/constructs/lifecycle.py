"""LifecycleScripts: the S3 prefix HyperPod runs on every node, with our runtime and parameters."""

from __future__ import annotations

import atexit
import functools
import re
import shutil
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import jsii
from aws_cdk import Acknowledgment, RemovalPolicy, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct, IValidation
from training_runtime.params import ProvisioningParameters

from hyperpod_cdk.constructs.buckets import secure_bucket
from hyperpod_cdk.errors import raise_if_any

_PREFIX = re.compile(r"^[a-zA-Z0-9!_.*'()-]+(/[a-zA-Z0-9!_.*'()-]+)*/?$")


@functools.cache
def staged_assets() -> Path:
    """One directory holding ``lifecycle_assets/*`` and the ``training_runtime`` package, as plain files.

    HyperPod downloads the prefix unzipped, so the runtime travels as source next to the entry scripts.
    """
    staging = Path(tempfile.mkdtemp(prefix="hyperpod-cdk-assets-"))
    atexit.register(shutil.rmtree, staging, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    assets = resources.files("hyperpod_cdk") / "lifecycle_assets"
    runtime = resources.files("training_runtime")
    with resources.as_file(assets) as assets_dir, resources.as_file(runtime) as runtime_dir:
        shutil.copytree(assets_dir, staging, dirs_exist_ok=True, ignore=ignore)
        shutil.copytree(runtime_dir, staging / "training_runtime", ignore=ignore)
    return staging


class LifecycleScripts(Construct):
    """An S3 prefix with HyperPod's lifecycle entry scripts, the node runtime and the cluster parameters.

    :param bucket: an existing bucket. Default: a new private, TLS-only, encrypted, versioned bucket that
        is retained when the stack is deleted.
    :param prefix: key prefix of the scripts; never empty, because the upload replaces the prefix's
        contents. Default: ``lifecycle/``.
    :param extra_assets: more files to upload under the prefix (e.g. a users file). Default: none.
    :param removal_policy: of a new bucket. Default: RETAIN.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        bucket: s3.IBucket | None = None,
        prefix: str = "lifecycle/",
        extra_assets: Sequence[s3deploy.ISource] = (),
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        if not _PREFIX.match(prefix):
            raise_if_any(
                f"LifecycleScripts {self.node.path}",
                [
                    f"prefix: got {prefix!r}; expected a non-empty key prefix such as 'lifecycle/' (no leading "
                    "slash; S3-safe characters). It must not be empty: the upload replaces everything under it"
                ],
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
        self.parameters: ProvisioningParameters | None = None
        self.node.add_validation(_ParametersAdded(self))

    @property
    def s3_uri(self) -> str:
        """``s3://bucket/prefix/``: HyperPod's ``LifeCycleConfig.SourceS3Uri``."""
        return f"s3://{self.bucket.bucket_name}/{self.prefix}"

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

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """Read access to the scripts' prefix only."""
        return self.bucket.grant_read(grantee, f"{self.prefix}*")

    def _acknowledge_upload_handler(self) -> None:
        handler = self.deployment.handler_role.node.scope
        if handler is None:
            return
        reasons = {
            "AwsSolutions-IAM4": "CDK's BucketDeployment handler uses AWSLambdaBasicExecutionRole for its logs",
            "AwsSolutions-IAM5": "CDK's BucketDeployment handler reads CDK's staging bucket and writes the "
            "destination prefix; CDK generates these object wildcards",
            "AwsSolutions-L1": "CDK pins the BucketDeployment handler's runtime; it moves with aws-cdk-lib",
        }
        for rule, reason in reasons.items():
            Validations.of(handler).acknowledge(Acknowledgment(id=rule, reason=reason))


@jsii.implements(IValidation)
class _ParametersAdded:
    def __init__(self, scripts: LifecycleScripts) -> None:
        self._scripts = scripts

    def validate(self) -> list[str]:
        if self._scripts.parameters is None:
            return [
                "LifecycleScripts has no cluster parameters, so nodes cannot bootstrap. Fix: pass it to a "
                "HyperPodCluster (which adds them) or call add_parameters()"
            ]
        return []
