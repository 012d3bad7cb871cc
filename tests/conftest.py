"""Test configuration: CDK's built-in template validator stays off except in test_compliance.py; the tiers
(``unit``, ``local``, ``slow``: docs/testing.md)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# The operator CLI's tables take COLUMNS as their width where output is not a terminal (hyperpod_cdk.ops.context);
# pytest-xdist's workers start with COLUMNS=80 and LINES=24 set, a plain run with the caller's: the tests expect
# neither, so that a table's rows are whole whatever runs them.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)


@pytest.fixture(autouse=True, scope="session")
def shared_botocore_data() -> Iterator[None]:
    """Every botocore session of the run reads AWS's service models through one loader: a command makes one
    session, a test run makes one per test, and each fresh session would parse the SageMaker and EC2 models again
    (about 0.4 s of CPU per session, the largest cost of the moto tests). The data is read-only. The Python 3.8 run
    of the node runtime's tests has no AWS SDK, and nothing to share."""
    try:
        import botocore.loaders
        import botocore.session
    except ImportError:
        yield
        return
    loader = botocore.loaders.create_loader()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.session, "create_loader", lambda search_paths_string=None: loader)
        yield


CLUSTER_PER_TEST = ("tests/test_local_examples.py",)
"""The test modules whose tests each bring up a cluster of their own (no module-scoped one): under pytest-xdist
their tests spread over the workers one by one."""
SHARED_SCOPES = {
    "tests/test_cfnlint_rules.py": "tests/test_scanners.py",
    "tests/test_examples.py": "tests/test_scanners.py",
    "tests/test_local_login_pool.py": "tests/test_local_directory.py",
}
"""Modules that share a session fixture with another (:func:`example_builds`, :func:`example_lint`,
:func:`scanned_templates`, :func:`directory_cluster`): under pytest-xdist they go to that module's worker, so the
fixture is built once."""
MODULE_SECONDS = {
    "tests/test_local_faults.py": 155,
    "tests/test_local_spot.py": 110,
    "tests/test_local_scaler.py": 95,
    "tests/test_local_autoresume.py": 75,
    "tests/test_local_jobs.py": 65,
    "tests/test_local_multihead.py": 55,
    "tests/test_local_hyperpod.py": 45,
    "tests/test_local_cost.py": 35,
    "tests/test_local_directory.py": 30,  # with tests/test_local_login_pool.py, on its cluster (SHARED_SCOPES)
    "tests/test_local_observability.py": 35,
    "tests/test_local_update_software.py": 30,
    "tests/test_local_cluster.py": 25,
    "tests/test_local_control_plane.py": 25,
    "tests/test_local_next_slurm.py": 25,
    "tests/test_local_hostile_home.py": 20,
    "tests/test_local_imds.py": 20,
    "tests/test_local_ami.py": 15,
}
"""About how long each module of the ``local`` tier that takes 15 s or more runs on one worker (set-up, tests and
tear-down: ``make local-tier``'s ``--durations=0`` on the 2-core machine): those modules are handed out longest
first, so the two workers end within a short module of each other (the tier's wall time is the longer worker's).
Modules not listed follow, their ``slow`` ones first. A figure a third off still orders well; a new long module
belongs here (docs/testing.md, "Tiers")."""


@pytest.fixture(scope="session")
def example_builds(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every example synthesized once (when a test first asks for it), as deployed, as published and as Service
    Catalog products (tests/example_builds.py), for the snapshots, checkov and our cfn-lint rules, which only read
    them."""
    from example_builds import ExampleBuilds

    return ExampleBuilds(tmp_path_factory.mktemp("examples"))


@pytest.fixture(scope="session")
def example_lint() -> Any:
    """cfn-lint (our rules appended, informational checks included) run once per template of the session."""
    from example_builds import LintOnce

    return LintOnce()


@pytest.fixture(scope="session")
def scanned_templates(example_builds: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every template a user deploys or a platform team publishes (``test_scanners._templates``: each example as
    deployed, as published, as a Service Catalog product) written to one directory for checkov."""
    from test_scanners import _templates

    return _templates(tmp_path_factory.mktemp("scan"), example_builds)


@pytest.fixture(scope="session")
def directory_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The local cluster with a real directory and a login pool (tests/directory_cluster.py), brought up once for
    tests/test_local_directory.py and tests/test_local_login_pool.py."""
    from directory_cluster import bring_up

    yield from bring_up(tmp_path_factory.mktemp("directory"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """How ``make test`` hands tests to pytest-xdist's workers (``--dist loadscope --no-loadscope-reorder``): a
    module's tests stay on one worker, which sets up its module-scoped fixtures (a local cluster, a synth) once,
    but for :data:`CLUSTER_PER_TEST`, and :data:`SHARED_SCOPES` join the module they share a fixture with; in
    collection order, where the longest modules come first (:func:`pytest_collection_modifyitems`), so that the
    workers end together, also under ``--dist loadscope`` alone (xdist's reordering by test count would undo it).
    (xdist's own ``loadgroup`` marks did not group here, with pytest 9.2 and xdist 3.8.) A worker gets its next
    module only when it is down to its last test (xdist's own gives it at two): then the next module goes to the
    worker that is about to be free, which is what handing out the longest modules first relies on."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if module in CLUSTER_PER_TEST else SHARED_SCOPES.get(module, module)

        def _reschedule(self, node: Any) -> None:
            # A worker runs a test once it knows the next one (for the tear-down of module-scoped fixtures), so one
            # test left is the latest moment to give it more without leaving it idle.
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) <= 1:
                self._assign_work_unit(node)

    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers: every test not marked ``local`` is ``unit``; a ``local`` test this machine cannot run is skipped
    with the reason (root, Slurm's packages, a node root file system: tests/local_support.py); and the modules of
    :data:`MODULE_SECONDS` are handed out first, longest first, then those with ``slow`` tests, whole, so that the
    workers end together."""
    reasons: dict[tuple[tuple[str, object], ...], str | None] = {}
    for item in items:
        marker = item.get_closest_marker("local")
        if marker is None:
            item.add_marker(pytest.mark.unit)
            continue
        key = tuple(sorted(marker.kwargs.items()))
        if key not in reasons:
            from local_support import local_reason

            reasons[key] = local_reason(**marker.kwargs)
        if reasons[key] is not None:
            item.add_marker(pytest.mark.skip(reason=str(reasons[key])))
    # By module, so that a module's tests stay together: a module-scoped fixture (checkov's report, a wheel, a
    # cluster) is torn down when the next test is another module's, and would be built again for the rest.
    slow = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: hand_out_order(item.nodeid.split("::", 1)[0], slow))  # stable: else collection order


def hand_out_order(module: str, slow: set[str]) -> tuple[int, bool]:
    """The sort key of ``module``'s tests: the modules of :data:`MODULE_SECONDS`, longest first, then the ``slow``."""
    return -MODULE_SECONDS.get(module, 0), module not in slow
