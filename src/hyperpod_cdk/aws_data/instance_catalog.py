"""Which instance types HyperPod offers where: the Region lists, next to the runtime's hardware table.

The hardware facts of each type (EC2's description: threads per core, accelerators, EFA...) live in one place,
``training_runtime.instance_facts`` (``INSTANCE_HARDWARE`` derives from it); this module adds only where each type is
offered (``data/instance_types_by_region.json``, from the AWS::SageMaker::Cluster schema of cfn-lint's bundle).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def _document() -> dict[str, Any]:
    text = (resources.files("hyperpod_cdk") / "data" / "instance_types_by_region.json").read_text()
    document: dict[str, Any] = json.loads(text)
    return document


def _data() -> dict[str, list[str]]:
    regions: dict[str, list[str]] = _document()["regions"]
    return regions


def api_only() -> frozenset[str]:
    """Types SageMaker's API accepts that the Region lists do not name yet (their Regions are unknown)."""
    return frozenset(_document()["api_only"])


def regions() -> list[str]:
    return sorted(_data())


def types_in(region: str) -> frozenset[str] | None:
    """The types HyperPod offers in ``region``; None for a Region the lists do not know."""
    types = _data().get(region)
    return frozenset(types) if types is not None else None


@cache
def known_types() -> frozenset[str]:
    """Every type HyperPod offers in some Region, or that its API accepts."""
    return frozenset(t for types in _data().values() for t in types) | api_only()


def regions_of(instance_type: str) -> list[str]:
    return [r for r, types in sorted(_data().items()) if instance_type in types]
