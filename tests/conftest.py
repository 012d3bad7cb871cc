"""Test configuration: CDK's built-in template validator stays off except in test_compliance.py; the tiers
(``unit``, ``local``, ``slow``: docs/testing.md)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers: every test not marked ``local`` is ``unit``; a ``local`` test this machine cannot run is skipped
    with the reason (root, Slurm's packages, a node root file system: tests/local_support.py).

    Under pytest-xdist (``make test``: ``--dist loadgroup --no-loadscope-reorder``) a module's tests stay on one
    worker, which sets up its module-scoped fixtures (a local cluster, a synth) once; the tests of a module marked
    ``local(cluster_per_test=True)`` each bring up their own cluster, so they spread over the workers; and the
    modules with ``slow`` tests are handed out first, so that the workers end together."""
    reasons: dict[tuple[tuple[str, object], ...], str | None] = {}
    grouped = config.pluginmanager.hasplugin("xdist") and config.getoption("dist", "no") == "loadgroup"
    for item in items:
        marker = item.get_closest_marker("local")
        if grouped and not (marker and marker.kwargs.get("cluster_per_test")):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module else item.nodeid))
        if marker is None:
            item.add_marker(pytest.mark.unit)
            continue
        needs = {k: v for k, v in marker.kwargs.items() if k != "cluster_per_test"}
        key = tuple(sorted(needs.items()))
        if key not in reasons:
            from local_support import local_reason

            reasons[key] = local_reason(**needs)
        if reasons[key] is not None:
            item.add_marker(pytest.mark.skip(reason=str(reasons[key])))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: otherwise collection order
