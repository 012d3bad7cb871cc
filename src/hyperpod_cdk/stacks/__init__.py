"""Deployable compositions of the constructs."""

from hyperpod_cdk.stacks.training_cluster import TrainingCluster, TrainingClusterStack

__all__ = ["TrainingCluster", "TrainingClusterStack"]
