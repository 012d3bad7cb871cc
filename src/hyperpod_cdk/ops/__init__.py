"""The operator CLI: ``hyperpod-cdk status|wait|connect|logs|reboot|...`` against a deployed HyperPod cluster.

``register`` adds the commands to ``hyperpod-cdk``'s parser and ``run`` dispatches them; neither imports boto3
or rich: each command module does, when it runs, so ``hyperpod-cdk --help`` stays fast.
"""

from __future__ import annotations

from hyperpod_cdk.ops.parser import register, run

__all__ = ["register", "run"]
