"""Deployable compositions of the constructs."""

from hyperpod_cdk.stacks.training_cluster import (
    PublishedTrainingClusterStack,
    TrainingCluster,
    TrainingClusterStack,
    published_synthesizer,
)

__all__ = ["PublishedTrainingClusterStack", "TrainingCluster", "TrainingClusterStack", "published_synthesizer"]
