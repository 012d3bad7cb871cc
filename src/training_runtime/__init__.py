"""hyperpod-cdk's node runtime: run by the lifecycle scripts on every HyperPod node.

Every module of this package runs on the node's system Python, 3.8 and newer, and imports only the standard
library: ``typing`` generics (``List``, ``Optional``), no ``X | Y`` at run time, no third-party package (a few
job-time helpers import ``torch`` inside the function that needs it). ``ruff check --target-version py38
src/training_runtime`` and the Python 3.8 unit run (``make unit38``) enforce it; module docstrings do not
repeat it."""

from training_runtime.params import ParametersError, ProvisioningParameters

__all__ = ["ParametersError", "ProvisioningParameters"]
