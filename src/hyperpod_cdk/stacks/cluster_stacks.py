"""The two stacks of one :class:`~hyperpod_cdk.stacks.training_cluster.TrainingCluster`: deployable with
``cdk deploy`` (:class:`TrainingClusterStack`) and published for others to launch
(:class:`PublishedTrainingClusterStack`). Both hold the composition as ``parts`` and expose its parts through
one base class, so they cannot drift apart."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import CliCredentialsStackSynthesizer, Stack
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_cdk.constructs import ClusterNetwork, HyperPodCluster, ImportedLustreFileSystem, LustreStorage
from hyperpod_cdk.constructs.lifecycle import LifecycleSource
from hyperpod_cdk.constructs.login_pool import LoginPool
from hyperpod_cdk.constructs.observability import ClusterObservability
from hyperpod_cdk.constructs.openzfs import ImportedOpenZfsFileSystem, OpenZfsStorage
from hyperpod_cdk.constructs.rest_api import SlurmRestApi
from hyperpod_cdk.core.config import ClusterConfig
from hyperpod_cdk.core.deployment import Deployment
from hyperpod_cdk.core.published_layout import PublishTarget, assets_key_prefix
from hyperpod_cdk.stacks.training_cluster import TrainingCluster


class _ClusterStack(Stack):
    """What both stacks expose: the parts of the :class:`TrainingCluster` they hold (``parts``), forwarded once
    here so the deployable and the published stack cannot drift apart."""

    parts: TrainingCluster

    @property
    def config(self) -> ClusterConfig:
        """The config as deployed (the organization's name prefix applied)."""
        return self.parts.config

    @property
    def deployment(self) -> Deployment:
        return self.parts.deployment

    @property
    def network(self) -> ClusterNetwork:
        return self.parts.network

    @property
    def data_buckets(self) -> dict[str, s3.IBucket]:
        return self.parts.data_buckets

    @property
    def storage(self) -> LustreStorage | ImportedLustreFileSystem | None:
        return self.parts.storage

    @property
    def openzfs(self) -> OpenZfsStorage | ImportedOpenZfsFileSystem | None:
        return self.parts.openzfs

    @property
    def lifecycle(self) -> LifecycleSource:
        return self.parts.lifecycle

    @property
    def observability(self) -> ClusterObservability | None:
        return self.parts.observability

    @property
    def cluster(self) -> HyperPodCluster:
        return self.parts.cluster

    @property
    def rest_api(self) -> SlurmRestApi | None:
        """Slurm's REST API (config ``rest_api``), or None."""
        return self.parts.rest_api

    @property
    def login_pool(self) -> LoginPool | None:
        """The login nodes behind one load balancer (config ``login_pool``), or None."""
        return self.parts.login_pool


class TrainingClusterStack(_ClusterStack):
    """:class:`TrainingCluster` as a stack: the bundled app deploys one of these.

    :param config: the whole cluster; validated before any construct is built.
    :param deployed_counts: the deployed cluster's count per group (:class:`TrainingCluster`). Default: None.
    :param deployed_roles: the deployed cluster's ``ExecutionRole`` per group (:class:`TrainingCluster`). Default:
        None.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: ClusterConfig,
        deployed_counts: Mapping[str, int] | None = None,
        deployed_roles: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("description", f"SageMaker HyperPod Slurm cluster {config.cluster_name} (hyperpod-cdk)")
        super().__init__(scope, id, **kwargs)
        self.parts = TrainingCluster(
            self, config=config, deployed_counts=deployed_counts, deployed_roles=deployed_roles
        )


def published_synthesizer(target: PublishTarget) -> CliCredentialsStackSynthesizer:
    """A synthesizer that needs no CDK bootstrap: no bootstrap-version parameter or rule, no bootstrap roles
    (the caller's credentials publish), file assets (e.g. a Service Catalog product's template) in the platform
    bucket under ``<prefix>assets/``."""
    return CliCredentialsStackSynthesizer(
        file_assets_bucket_name=target.bucket_name, bucket_prefix=assets_key_prefix(target.prefix)
    )


class PublishedTrainingClusterStack(_ClusterStack):
    """:class:`TrainingCluster` as a template to publish (``hyperpod-cdk publish``): no reference to CDK
    bootstrap resources, no assets, no Lambda functions; the lifecycle prefix lives in ``target``'s bucket.

    :param config: the whole cluster; validated before any construct is built.
    :param target: the platform bucket and key prefix the template and its files are published to.
    """

    def __init__(
        self, scope: Construct, id: str, *, config: ClusterConfig, target: PublishTarget, **kwargs: Any
    ) -> None:
        kwargs.setdefault("description", f"SageMaker HyperPod Slurm cluster {config.cluster_name} (hyperpod-cdk)")
        kwargs.setdefault("synthesizer", published_synthesizer(target))
        super().__init__(scope, id, **kwargs)
        self.parts = TrainingCluster(self, config=config, published=target)
