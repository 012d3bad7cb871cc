"""PublishedLifecycleScripts: a lifecycle prefix fixed at synth, that ``hyperpod-cdk publish`` uploads.

A published template must work in an account without the CDK bootstrap stack and without asset-upload
Lambda functions, so the stack does not upload the scripts. The prefix is content-addressed instead:
``s3://<platform bucket>/<prefix>lifecycle/<tree hash>/``, where the hash covers every file under it (the
entry scripts, the runtime, the parameters file and the users file). At synth the files are written into the
cloud assembly (``published_layout.LifecycleTree``) and ``publish`` uploads exactly those bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import Aspects, IAspect, IStableStringProducer, Lazy, Stack, Stage, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct, IDependable

from hyperpod_cdk.constructs.lifecycle import ParametersAdded, acknowledge_prefix_read, grant_prefix_read
from hyperpod_cdk.core.errors import raise_if_any
from hyperpod_cdk.core.lifecycle_files import prefix_files, staged_assets
from hyperpod_cdk.core.published_layout import (
    ACCOUNT_ID,
    LifecycleTree,
    lifecycle_key_prefix,
    normal_prefix,
    prefix_problem,
    tree_hash,
)
from training_runtime.params import ProvisioningParameters
from training_runtime.users import User


class PublishedLifecycleScripts(Construct):
    """The lifecycle prefix of a published template, in the platform team's bucket (same interface as
    :class:`~hyperpod_cdk.constructs.lifecycle.LifecycleScripts`).

    Its key prefix is known once every file is: the parameters and users are added after construction, so
    :attr:`prefix` and :attr:`s3_uri` are tokens that resolve at synth, when the files are frozen (adding a
    file after that is an error). The execution role may read that prefix only.

    :param bucket_name: the platform bucket ``hyperpod-cdk publish --bucket`` uploads to (a literal name).
    :param prefix: the platform's key prefix (``publish --prefix``). Default: the bucket's root.
    :param bucket_owner: the account ID that owns the platform bucket (``publish`` checks it on every call:
        ``ExpectedBucketOwner``); the nodes read the prefix only from a bucket of this account
        (``aws:ResourceAccount``). Default: the account the stack is launched in.
    """

    def __init__(
        self, scope: Construct, id: str, *, bucket_name: str, prefix: str = "", bucket_owner: str | None = None
    ) -> None:
        super().__init__(scope, id)
        prefix = normal_prefix(prefix)
        problems = []
        if Token.is_unresolved(bucket_name) or not bucket_name:
            problems.append(
                f"bucket_name: got {bucket_name!r}; a published template's lifecycle bucket is fixed when it is "
                "published. Fix: give the platform bucket's name as a literal"
            )
        problem = prefix_problem(prefix)
        if problem:
            problems.append(problem)
        if bucket_owner is not None and not ACCOUNT_ID.match(bucket_owner):
            problems.append(f"bucket_owner: got {bucket_owner!r}; expected a 12-digit AWS account ID")
        raise_if_any(f"PublishedLifecycleScripts {self.node.path}", problems)
        self.bucket_name = bucket_name
        self.platform_prefix = prefix
        self.bucket_owner = bucket_owner or Stack.of(self).account
        self.bucket: s3.IBucket = s3.Bucket.from_bucket_name(self, "Bucket", bucket_name)
        self.assets_dir = staged_assets()
        self.parameters: ProvisioningParameters | None = None
        self.users: list[User] | None = None
        self._readers: list[iam.IGrantable] = []
        self._tree: str | None = None
        self.node.add_validation(ParametersAdded(self))
        Aspects.of(self).add(_FreezeAtSynth(self))

    # --- the interface HyperPodCluster uses ---------------------------------------------------------
    @property
    def prefix(self) -> str:
        """``<platform prefix>lifecycle/<tree hash>/`` (a token until synth)."""
        return Lazy.string(_TreePrefix(self))

    @property
    def s3_uri(self) -> str:
        return f"s3://{self.bucket_name}/{self.prefix}"

    @property
    def resolves_at_deploy(self) -> bool:
        """No: nothing resolves CloudFormation values in these files, so they must hold none."""
        return False

    @property
    def upload_dependencies(self) -> Sequence[IDependable]:
        """None: ``publish`` uploads the prefix before the template that names it exists."""
        return []

    def has_script(self, name: str) -> bool:
        return (self.assets_dir / name).is_file()

    def add_parameters(self, parameters: ProvisioningParameters) -> None:
        where = f"PublishedLifecycleScripts {self.node.path}"
        self._check_open(where, "parameters")
        if self.parameters is not None:
            raise_if_any(where, [f"parameters: already set for cluster {self.parameters.cluster_name!r}"])
        raise_if_any(
            where,
            [
                f"parameters.{path}: holds a value only known at deploy ({value}); a published lifecycle prefix "
                "is fixed at synth. Fix: give a literal value, or leave it out of the parameters file"
                for path, value in deploy_time_values(parameters.to_json())
            ],
        )
        self.parameters = parameters

    def add_users(self, users: Sequence[User]) -> None:
        where = f"PublishedLifecycleScripts {self.node.path}"
        self._check_open(where, "users")
        if self.users is not None:
            raise_if_any(where, ["users: the users file was already added"])
        self.users = list(users)

    def grant_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """Read of the objects under this prefix (cdk-nag's findings acknowledged at synth, with the hash)."""
        self._readers.append(grantee)
        return grant_prefix_read(self.bucket, grantee, self.prefix, self.bucket_owner)

    # --- the files -----------------------------------------------------------------------------------
    def files(self) -> dict[str, bytes]:
        """Every file under the prefix: the staged assets, the parameters file and the users file."""
        return prefix_files(self.assets_dir, self.parameters, self.users)

    @property
    def tree(self) -> str:
        """The files' hash: computed once, when first needed (at synth); the files cannot change after."""
        if self._tree is None:
            files = self.files()
            self._tree = tree_hash(files)
            key_prefix = lifecycle_key_prefix(self.platform_prefix, self._tree)
            stage = Stage.of(self)
            assert stage is not None  # a construct in an App
            LifecycleTree.at(Path(stage.outdir), self._tree, self.bucket_name, key_prefix).write(files)
            for reader in self._readers:
                acknowledge_prefix_read(reader, self.bucket, key_prefix)
        return self._tree

    def _check_open(self, where: str, what: str) -> None:
        if self._tree is not None:
            raise_if_any(
                where,
                [f"{what}: added after synth fixed the prefix's files. Fix: add it before synthesizing the app"],
            )


def deploy_time_values(data: Any, path: str = "") -> list[tuple[str, str]]:
    """Every value in ``data`` (JSON-like) that is a CDK token, with its dotted path."""
    found: list[tuple[str, str]] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            found += deploy_time_values(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list | tuple):
        for index, value in enumerate(data):
            found += deploy_time_values(value, f"{path}[{index}]")
    elif isinstance(data, str | int | float) and Token.is_unresolved(data):
        found.append((path, str(data)))
    return found


@jsii.implements(IStableStringProducer)
class _TreePrefix:
    def __init__(self, scripts: PublishedLifecycleScripts) -> None:
        self._scripts = scripts

    def produce(self) -> str:
        return lifecycle_key_prefix(self._scripts.platform_prefix, self._scripts.tree)


@jsii.implements(IAspect)
class _FreezeAtSynth:
    """Fixes the files at the start of synth (aspects run before any token is resolved)."""

    def __init__(self, scripts: PublishedLifecycleScripts) -> None:
        self._scripts = scripts

    def visit(self, node: IConstruct) -> None:
        if node is self._scripts and self._scripts.parameters is not None:
            self._scripts.tree  # noqa: B018 - computing it writes the files and the acknowledgements
