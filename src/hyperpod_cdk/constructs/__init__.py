"""The construct library: each construct can be used on its own or composed by TrainingClusterStack."""

from hyperpod_cdk.constructs.buckets import secure_bucket
from hyperpod_cdk.constructs.cluster import HyperPodCluster
from hyperpod_cdk.constructs.cluster_grants import ClusterBase
from hyperpod_cdk.constructs.execution_role import NodeExecutionRole
from hyperpod_cdk.constructs.interfaces import LustreTarget, NodeNetwork, OpenZfsTarget
from hyperpod_cdk.constructs.lifecycle import LifecycleScripts
from hyperpod_cdk.constructs.login_pool import LoginPool
from hyperpod_cdk.constructs.network import ClusterNetwork
from hyperpod_cdk.constructs.observability import ClusterObservability
from hyperpod_cdk.constructs.openzfs import ImportedOpenZfsFileSystem, OpenZfsStorage
from hyperpod_cdk.constructs.published_lifecycle import PublishedLifecycleScripts
from hyperpod_cdk.constructs.rest_api import SlurmRestApi
from hyperpod_cdk.constructs.storage import ImportedLustreFileSystem, LustreStorage, S3DataRepository
from hyperpod_cdk.model import (
    DataRepositoryEvent,
    DeepHealthCheck,
    InstanceGroup,
    NodeRecovery,
    NodeRole,
    SlurmConfigStrategy,
    SlurmMode,
)

__all__ = [
    "ClusterBase",
    "ClusterNetwork",
    "ClusterObservability",
    "DataRepositoryEvent",
    "DeepHealthCheck",
    "HyperPodCluster",
    "ImportedLustreFileSystem",
    "ImportedOpenZfsFileSystem",
    "InstanceGroup",
    "LifecycleScripts",
    "LoginPool",
    "LustreStorage",
    "LustreTarget",
    "NodeExecutionRole",
    "NodeNetwork",
    "NodeRecovery",
    "NodeRole",
    "OpenZfsStorage",
    "OpenZfsTarget",
    "PublishedLifecycleScripts",
    "S3DataRepository",
    "SlurmConfigStrategy",
    "SlurmMode",
    "SlurmRestApi",
    "secure_bucket",
]
