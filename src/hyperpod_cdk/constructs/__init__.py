"""The construct library: each construct can be used on its own or composed by TrainingClusterStack."""

from hyperpod_cdk.constructs.buckets import secure_bucket
from hyperpod_cdk.constructs.cluster import (
    HyperPodCluster,
    NodeRecovery,
    SlurmConfigStrategy,
    SlurmMode,
)
from hyperpod_cdk.constructs.instance_group import DeepHealthCheck, InstanceGroup, NodeRole
from hyperpod_cdk.constructs.lifecycle import LifecycleScripts
from hyperpod_cdk.constructs.network import ClusterNetwork
from hyperpod_cdk.constructs.storage import (
    DataRepositoryEvent,
    ExistingLustreFileSystem,
    LustreStorage,
    S3DataRepository,
)

__all__ = [
    "ClusterNetwork",
    "DataRepositoryEvent",
    "DeepHealthCheck",
    "ExistingLustreFileSystem",
    "HyperPodCluster",
    "InstanceGroup",
    "LifecycleScripts",
    "LustreStorage",
    "NodeRecovery",
    "NodeRole",
    "S3DataRepository",
    "SlurmConfigStrategy",
    "SlurmMode",
    "secure_bucket",
]
