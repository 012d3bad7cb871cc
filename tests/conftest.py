"""Test configuration: CDK's built-in template validator stays off except in test_compliance.py."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


NODE_NAMES_ENV = "HYPERPOD_LOCAL_TEST_NODE_NAMES"
"""Set to ``instance`` (or ``ip``) to bring every HyperPod-platform local cluster of the run up in that naming,
where its test does not choose one itself: ``HYPERPOD_LOCAL_TEST_NODE_NAMES=instance pytest tests/test_local_*.py``
(docs/testing.md). Unset, each test runs in the naming it names or the platform's default."""


@pytest.fixture(autouse=True, scope="session")
def _local_cluster_naming() -> Iterator[None]:
    naming = os.environ.get(NODE_NAMES_ENV)
    if not naming:
        yield
        return
    from hyperpod_local import hyperpod_platform

    original = hyperpod_platform.check_naming

    def check_naming(platform: str, chosen: str | None) -> str:
        return original(platform, naming if chosen is None and platform == hyperpod_platform.HYPERPOD else chosen)

    patch = pytest.MonkeyPatch()
    patch.setattr(hyperpod_platform, "check_naming", check_naming)
    try:
        yield
    finally:
        patch.undo()
