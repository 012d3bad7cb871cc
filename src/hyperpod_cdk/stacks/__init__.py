"""Deployable compositions of the constructs."""

from hyperpod_cdk.stacks.training_cluster import TrainingClusterStack

__all__ = ["TrainingClusterStack"]
