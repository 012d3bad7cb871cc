"""Which instance types HyperPod offers where: the Region lists, next to the runtime's hardware table.

The figures of each type (CPUs, memory, GPUs, Neuron devices, EFA interfaces) live in one place,
``training_runtime.hardware.INSTANCE_HARDWARE``; this module adds only where each type is offered
(``data/instance_types_by_region.json``, from the AWS::SageMaker::Cluster schema of cfn-lint's bundle).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

GRAVITON = re.compile(r"^ml\.[a-z]+\d+g[a-z]*\.")
"""Graviton (Arm) families: one thread per core, so ThreadsPerCore must be 1."""
GPU_DIRECT_STORAGE_FAMILIES = ("ml.p5.", "ml.p5e.", "ml.p5en.", "ml.p6-b200.")
"""Instance types that can read FSx for Lustre over EFA with GPUDirect Storage (FSx for Lustre user guide)."""


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


def has_smt(instance_type: str) -> bool:
    """Whether the type has two threads per core (x86); Graviton types have one."""
    return not GRAVITON.match(instance_type)


def supports_gpudirect_storage(instance_type: str) -> bool:
    return instance_type.startswith(GPU_DIRECT_STORAGE_FAMILIES)
