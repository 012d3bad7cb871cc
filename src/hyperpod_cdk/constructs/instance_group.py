"""Instance groups: the value objects live in :mod:`hyperpod_cdk.model` (no aws_cdk there)."""

from hyperpod_cdk.model import DeepHealthCheck, InstanceGroup, NodeRole

__all__ = ["DeepHealthCheck", "InstanceGroup", "NodeRole"]
