"""hyperpod-cdk: AWS CDK constructs for SageMaker HyperPod Slurm training clusters.

The names below load on first use (PEP 562), so ``hyperpod_cdk.core.config``, ``hyperpod_cdk.rules`` and the
command line work without importing aws_cdk or starting Node.js. Importing the package changes nothing in the
process's environment (jsii's Node.js end-of-life banner: :mod:`hyperpod_cdk.core.node_banner`).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (`hyperpod-cdk --help` stays light)

_HOMES = {
    "ClusterConfig": "hyperpod_cdk.core.config",
    "load_config": "hyperpod_cdk.core.config",
    "parse_config": "hyperpod_cdk.core.config",
    "ConfigurationError": "hyperpod_cdk.core.errors",
    "DataRepositoryEvent": "hyperpod_cdk.model",
    "DeepHealthCheck": "hyperpod_cdk.model",
    "ExecutionRoleChoice": "hyperpod_cdk.model",
    "InstanceGroup": "hyperpod_cdk.model",
    "NodeRecovery": "hyperpod_cdk.model",
    "NodeRole": "hyperpod_cdk.model",
    "SlurmConfigStrategy": "hyperpod_cdk.model",
    "SlurmMode": "hyperpod_cdk.model",
    "ClusterNetwork": "hyperpod_cdk.constructs",
    "ClusterObservability": "hyperpod_cdk.constructs",
    "HyperPodCluster": "hyperpod_cdk.constructs",
    "ClusterBase": "hyperpod_cdk.constructs",
    "NodeExecutionRole": "hyperpod_cdk.constructs",
    "LifecycleScripts": "hyperpod_cdk.constructs",
    "LustreStorage": "hyperpod_cdk.constructs",
    "OpenZfsStorage": "hyperpod_cdk.constructs",
    "S3DataRepository": "hyperpod_cdk.constructs",
    "OrganizationRules": "hyperpod_cdk.organization",
    "TrainingCluster": "hyperpod_cdk.stacks",
    "TrainingClusterStack": "hyperpod_cdk.stacks",
    "PublishedTrainingClusterStack": "hyperpod_cdk.stacks",
    "PublishedLifecycleScripts": "hyperpod_cdk.constructs",
    "PublishTarget": "hyperpod_cdk.core.published_layout",
    "silence_node_end_of_life_banner": "hyperpod_cdk.core.node_banner",
}

__all__ = [
    "ClusterBase",
    "ClusterConfig",
    "ClusterNetwork",
    "ClusterObservability",
    "ConfigurationError",
    "DataRepositoryEvent",
    "DeepHealthCheck",
    "ExecutionRoleChoice",
    "HyperPodCluster",
    "InstanceGroup",
    "LifecycleScripts",
    "LustreStorage",
    "NodeExecutionRole",
    "NodeRecovery",
    "NodeRole",
    "OpenZfsStorage",
    "OrganizationRules",
    "PublishTarget",
    "PublishedLifecycleScripts",
    "PublishedTrainingClusterStack",
    "S3DataRepository",
    "SlurmConfigStrategy",
    "SlurmMode",
    "TrainingCluster",
    "TrainingClusterStack",
    "load_config",
    "parse_config",
    "silence_node_end_of_life_banner",
]

if TYPE_CHECKING:
    from typing import Any

    from hyperpod_cdk.constructs import (
        ClusterBase,
        ClusterNetwork,
        ClusterObservability,
        HyperPodCluster,
        LifecycleScripts,
        LustreStorage,
        NodeExecutionRole,
        OpenZfsStorage,
        PublishedLifecycleScripts,
        S3DataRepository,
    )
    from hyperpod_cdk.core.config import ClusterConfig, load_config, parse_config
    from hyperpod_cdk.core.errors import ConfigurationError
    from hyperpod_cdk.core.node_banner import silence_node_end_of_life_banner
    from hyperpod_cdk.core.published_layout import PublishTarget
    from hyperpod_cdk.model import (
        DataRepositoryEvent,
        DeepHealthCheck,
        ExecutionRoleChoice,
        InstanceGroup,
        NodeRecovery,
        NodeRole,
        SlurmConfigStrategy,
        SlurmMode,
    )
    from hyperpod_cdk.organization import OrganizationRules
    from hyperpod_cdk.stacks import PublishedTrainingClusterStack, TrainingCluster, TrainingClusterStack


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'hyperpod_cdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
