"""Deployable compositions of the constructs."""

from hyperpod_cdk.stacks.cluster_stacks import (
    PublishedTrainingClusterStack,
    TrainingClusterStack,
    published_synthesizer,
)
from hyperpod_cdk.stacks.training_cluster import TrainingCluster

__all__ = ["PublishedTrainingClusterStack", "TrainingCluster", "TrainingClusterStack", "published_synthesizer"]
