"""How ``make test`` hands modules to its two pytest-xdist workers (tests/conftest.py): a module stays on one worker,
the modules of ``MODULE_SECONDS`` go out longest first, then the ``slow`` ones, and a worker gets its next module only
when it is down to its last test, so that the next module goes to the worker about to be free. Driven through
xdist's own scheduler with stand-in workers: no processes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import conftest

ROOT = Path(__file__).resolve().parent.parent


class Worker:
    """What the scheduler calls on a worker: the tests it was sent, in order."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def send_runtest_all(self) -> None:
        raise AssertionError("never all at once")

    def shutdown(self) -> None:
        self.shutting_down = True


def scheduler(collection: list[str]) -> tuple[Any, Worker, Worker]:
    config = SimpleNamespace(getvalue=lambda name: ["2*popen"], option=SimpleNamespace(loadscopereorder=True))
    sched = conftest.pytest_xdist_make_scheduler(config, SimpleNamespace(loadscopesched=lambda *args: None))
    a, b = Worker("gw0"), Worker("gw1")
    for worker in (a, b):
        sched.add_node(worker)
        sched.add_node_collection(worker, collection)
    sched.schedule()
    return sched, a, b


def modules(collection: list[str], worker: Worker) -> list[str]:
    names: list[str] = []
    for index in worker.sent:
        module = collection[index].split("::")[0]
        if not names or names[-1] != module:
            names.append(module)
    return names


def test_a_worker_gets_its_next_module_at_its_last_test_not_before() -> None:
    collection = [f"tests/test_a.py::t{n}" for n in range(3)] + ["tests/test_b.py::t0", "tests/test_c.py::t0"]
    collection += ["tests/test_d.py::t0", "tests/test_d.py::t1"]
    sched, a, b = scheduler(collection)  # in collection order, though asked to reorder by test count (test_d first)
    # b's module is one test: it needs the next one to start it; a has three and gets nothing more yet
    assert (modules(collection, a), modules(collection, b)) == (
        ["tests/test_a.py"],
        ["tests/test_b.py", "tests/test_c.py"],
    )
    sched.mark_test_complete(a, a.sent[0])  # two left on a: xdist's own would hand it test_d.py now
    assert modules(collection, a) == ["tests/test_a.py"]
    sched.mark_test_complete(a, a.sent[1])  # its last test
    assert modules(collection, a) == ["tests/test_a.py", "tests/test_d.py"]


def test_the_longest_modules_go_first_then_the_slow_ones() -> None:
    slow = {"tests/test_slow.py"}
    names = ["tests/test_a.py", "tests/test_slow.py", "tests/test_local_scaler.py", "tests/test_local_faults.py"]
    order = sorted(names, key=lambda module: conftest.hand_out_order(module, slow))
    assert order == [
        "tests/test_local_faults.py",
        "tests/test_local_scaler.py",
        "tests/test_slow.py",
        "tests/test_a.py",
    ]


def test_every_module_with_a_figure_exists() -> None:
    missing = [module for module in conftest.MODULE_SECONDS if not (ROOT / module).is_file()]
    assert missing == []
