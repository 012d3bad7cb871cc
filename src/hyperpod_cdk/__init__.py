"""hyperpod-cdk: AWS CDK constructs for SageMaker HyperPod Slurm training clusters."""

from hyperpod_cdk.config import ClusterConfig, load_config, parse_config
from hyperpod_cdk.constructs import (
    ClusterNetwork,
    DataRepositoryEvent,
    DeepHealthCheck,
    ExistingLustreFileSystem,
    HyperPodCluster,
    InstanceGroup,
    LifecycleScripts,
    LustreStorage,
    NodeRecovery,
    NodeRole,
    S3DataRepository,
    SlurmConfigStrategy,
    SlurmMode,
)
from hyperpod_cdk.errors import ConfigurationError
from hyperpod_cdk.stacks import TrainingClusterStack

__all__ = [
    "ClusterConfig",
    "ClusterNetwork",
    "ConfigurationError",
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
    "TrainingClusterStack",
    "load_config",
    "parse_config",
]
