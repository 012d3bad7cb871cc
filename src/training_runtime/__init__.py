"""hyperpod-cdk's node runtime: run by the lifecycle scripts on every HyperPod node (stdlib only)."""

from training_runtime.params import ParametersError, ProvisioningParameters

__all__ = ["ParametersError", "ProvisioningParameters"]
