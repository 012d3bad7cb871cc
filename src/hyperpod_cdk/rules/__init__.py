"""Every rule the configuration decides, in one registry (no aws_cdk import).

``hyperpod-cdk validate``, ``ClusterConfig.check()`` and the constructs run the same rules: the config
through a :class:`ClusterView` of the whole file, each construct through a view of its own props, with
CDK tokens skipped (the construct injects ``Token.is_unresolved``; a YAML file never holds tokens).
``docs/rules.md`` is generated from this registry (``python -m hyperpod_cdk.rules``).
"""

from __future__ import annotations

# Importing the rule modules registers their rules, in this order (the order problems are reported in).
from hyperpod_cdk.rules import cluster as _cluster  # noqa: F401
from hyperpod_cdk.rules import groups as _groups  # noqa: F401
from hyperpod_cdk.rules import lifecycle as _lifecycle  # noqa: F401
from hyperpod_cdk.rules import network as _network  # noqa: F401
from hyperpod_cdk.rules import observability as _observability  # noqa: F401
from hyperpod_cdk.rules import organization as _organization  # noqa: F401
from hyperpod_cdk.rules import parameters as _parameters  # noqa: F401
from hyperpod_cdk.rules import runtime as _runtime  # noqa: F401
from hyperpod_cdk.rules import storage as _storage  # noqa: F401

# isort: split
# The rules on the HyperPod API's newer group settings, after the rules they build on.
from hyperpod_cdk.rules import accounting as _accounting  # noqa: F401
from hyperpod_cdk.rules import capacity as _capacity  # noqa: F401
from hyperpod_cdk.rules import flexible as _flexible  # noqa: F401
from hyperpod_cdk.rules import group_network as _group_network  # noqa: F401
from hyperpod_cdk.rules import images as _images  # noqa: F401
from hyperpod_cdk.rules import multihead as _multihead  # noqa: F401
from hyperpod_cdk.rules import openzfs as _openzfs  # noqa: F401
from hyperpod_cdk.rules import volumes as _volumes  # noqa: F401

# isort: split
# The online rules (needs aws): only `hyperpod-cdk preflight` / `validate --online` run them; no boto3 import.
from hyperpod_cdk.preflight import rules as _preflight  # noqa: F401

# isort: split
from hyperpod_cdk.rules.registry import REGISTRY, SECTIONS, all_rules, run
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import ERROR, WARNING, Problem, Rule, errors, warnings


def check(view: ClusterView) -> list[Problem]:
    """Every problem the rules find in ``view``: errors and warnings, in registry order."""
    return run(view)


__all__ = [
    "ERROR",
    "REGISTRY",
    "SECTIONS",
    "WARNING",
    "ClusterView",
    "Problem",
    "Rule",
    "all_rules",
    "check",
    "errors",
    "warnings",
]
