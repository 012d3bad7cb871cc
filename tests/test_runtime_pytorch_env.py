"""The cluster's PyTorch environment: built once under a shared lock, marker last, waited for, rebuilt if stale."""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime_fakes import RecordingRunner, fake_node, touch
from training_runtime.errors import StepFailed
from training_runtime.node import Node
from training_runtime.options import options_problems
from training_runtime.pins import NEURON_TORCH_SERIES
from training_runtime.retry import NotReady, RetryPolicy
from training_runtime.run import Result
from training_runtime.steps.pytorch_env import (
    ENV_VARIABLE,
    NEURON_PIP_INDEX,
    NEURONX_CC,
    PROFILE_SCRIPT,
    SMDDP_WHEELS,
    TORCH_NEURONX,
    PytorchEnvironment,
    plan_env,
    profile_script,
    pytorch_steps,
)

CU124 = "https://download.pytorch.org/whl/cu124"
PIP = ["install", "--no-cache-dir", "--disable-pip-version-check"]
FAST = RetryPolicy(attempts=3, base_s=0.0, cap_s=0.0, deadline_s=0.5)
SHARED = "/fsx/.hyperpod-cdk"


class EnvRunner(RecordingRunner):
    """Records commands; ``venv`` creates the environment's python, the check prints torch's version.

    ``before`` runs on every command before it is recorded (e.g. to assert the marker is not there yet).
    """

    def __init__(self, root: Path, torch: str = "2.5.1+cu124", fail: tuple[str, ...] | None = None) -> None:
        super().__init__()
        self.root = root
        self.torch = torch
        self.fail = fail
        self.before: Callable[[list[str]], None] | None = None

    def run(self, argv: Any, **kwargs: Any) -> Result:
        argv = list(argv)
        if self.before is not None:
            self.before(argv)
        if argv[1:3] == ["-m", "venv"]:
            touch(self.root, argv[3] + "/bin/python")
            touch(self.root, argv[3] + "/bin/pip")
        if self.fail and tuple(argv[: len(self.fail)]) == self.fail:
            self.respond[self.fail] = (1, "ERROR: No matching distribution found for torch==9.9.9")
        elif argv[-2:-1] == ["-c"] and argv[0].endswith("/bin/python"):
            self.respond[tuple(argv)] = (0, self.torch + "\n")
        return super().run(argv, **kwargs)


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    path = tmp_path / "fsx"
    path.mkdir()
    return path


def make_node(
    tmp_path: Path,
    shared: Path,
    instance: str = "workers-1",
    pytorch: dict[str, Any] | None = None,
    torch: str = "2.5.1+cu124",
    python: str = "3.10",
    neuron: bool = False,
    fail: tuple[str, ...] | None = None,
) -> Node:
    """A node whose /fsx is the test's shared directory (so several nodes see one file system)."""
    root = tmp_path / instance
    (root / "usr/bin").mkdir(parents=True)
    os.chmod(touch(root, "/usr/bin/python" + python, "#!/bin/false\n"), 0o755)
    os.symlink("python" + python, root / "usr/bin/python3")
    os.symlink(shared, root / "fsx")
    if neuron:
        for i in range(16):
            base = f"/sys/bus/pci/devices/0000:{0x10 + i:02x}:00.0"
            touch(root, base + "/vendor", "0x1d0f\n")
            touch(root, base + "/device", "0x7164\n")
            touch(root, base + "/class", "0x088000\n")
    options = {"pytorch": pytorch or {"version": "2.5.1", "index_url": CU124, "packages": ["numpy==2.1.0"]}}
    return fake_node(root, instance=instance, options=options, runner=EnvRunner(root, torch, fail))


def runner_of(node: Node) -> EnvRunner:
    assert isinstance(node.runner, EnvRunner)
    return node.runner


def env_of(node: Node) -> str:
    options = node.options.pytorch
    assert options is not None
    return plan_env(node, options).env


@pytest.fixture
def held_lock() -> Iterator[Callable[[Node, str], None]]:
    """Take the environment's lock the way another node would (a real flock on the lock file)."""
    handles: list[int] = []

    def hold(node: Node, holder: str) -> None:
        path = node.path(PytorchEnvironment().lock_path(node, plan_env(node, node.options.pytorch)))  # type: ignore[arg-type]
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(str(path), os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # a holder's record: only formatted into the message, never compared with a clock
        os.write(fd, json.dumps({"instance": holder, "since": 1767225600}).encode())
        handles.append(fd)

    yield hold
    for fd in handles:
        os.close(fd)


# --- building once ---------------------------------------------------------------------------------


def test_first_node_builds_once_and_writes_the_marker_last(tmp_path: Path, shared: Path) -> None:
    node = make_node(tmp_path, shared)
    runner = runner_of(node)
    env = env_of(node)
    assert re.fullmatch(r"/fsx/\.hyperpod-cdk/envs/pytorch-2\.5\.1-[0-9a-f]{12}", env)
    marker = node.path(env + "/.complete")

    def marker_absent(argv: list[str]) -> None:
        assert not marker.exists(), f"marker written before {argv}"

    runner.before = marker_absent
    step = PytorchEnvironment(wait=FAST)
    assert step.needed(node)
    step.apply(node)
    assert runner.commands == [
        ["/usr/bin/python3.10", "-m", "venv", env],
        [env + "/bin/pip", *PIP, "--index-url", CU124, "torch==2.5.1"],
        [env + "/bin/pip", *PIP, "--extra-index-url", CU124, "torch==2.5.1", "numpy==2.1.0"],
        [env + "/bin/python", "-c", "import torch; print(torch.__version__)"],
    ]
    spec = json.loads(marker.read_text())
    assert spec == {
        "torch": "2.5.1",
        "index_url": CU124,
        "packages": ["numpy==2.1.0"],
        "smp": False,
        "smddp": False,
        "flavor": "default",
        "python": "3.10",
    }
    assert node.path(PROFILE_SCRIPT).read_text() == profile_script(env)
    assert f"export {ENV_VARIABLE}={env}\n" in profile_script(env)
    assert f'export PATH={env}/bin:"${{PATH}}"' in profile_script(env)
    runner.commands.clear()
    assert not step.needed(node)
    assert runner.commands == []
    assert step.describe(node) == []


def test_second_node_finds_the_marker_and_only_writes_its_profile(tmp_path: Path, shared: Path) -> None:
    first = make_node(tmp_path, shared, "workers-1")
    PytorchEnvironment(wait=FAST).apply(first)
    second = make_node(tmp_path, shared, "workers-2")
    step = PytorchEnvironment(wait=FAST)
    assert step.needed(second)  # its profile script is missing
    assert step.describe(second) == [f"write {PROFILE_SCRIPT} ({ENV_VARIABLE}={env_of(second)})"]
    step.apply(second)
    assert runner_of(second).commands == []
    assert env_of(second) == env_of(first)
    assert second.path(PROFILE_SCRIPT).read_text() == profile_script(env_of(first))
    assert not step.needed(second)


def test_a_stale_half_built_env_is_removed_and_rebuilt(tmp_path: Path, shared: Path) -> None:
    node = make_node(tmp_path, shared)
    env = env_of(node)
    touch(node.root, env + "/lib/python3.10/site-packages/half-installed.py", "x")
    step = PytorchEnvironment(wait=FAST)
    assert step.needed(node)
    step.apply(node)
    assert not node.path(env + "/lib/python3.10/site-packages/half-installed.py").exists()
    assert runner_of(node).ran("/usr/bin/python3.10", "-m", "venv")
    assert node.path(env + "/.complete").exists()
    assert not step.needed(node)


def test_a_held_lock_makes_the_node_wait_then_fail_clearly(
    tmp_path: Path, shared: Path, held_lock: Callable[[Node, str], None]
) -> None:
    node = make_node(tmp_path, shared, "workers-2")
    held_lock(node, "workers-1")
    step = PytorchEnvironment(wait=RetryPolicy(attempts=50, base_s=0.01, cap_s=0.02, deadline_s=0.3))
    started = time.monotonic()
    with pytest.raises(StepFailed) as failure:
        step.apply(node)
    assert time.monotonic() - started >= 0.3  # it waited out the deadline
    message = str(failure.value)
    assert "gave up after" in message
    assert "being built by another node (held by workers-1 since 2026-01-01T00:00:00Z)" in message
    assert "{}/locks/{}.lock".format(SHARED, env_of(node).rsplit("/", 1)[1]) in message
    assert runner_of(node).commands == []
    assert not node.path(PROFILE_SCRIPT).exists()


def test_a_waiting_node_uses_the_env_once_the_builder_finishes(
    tmp_path: Path, shared: Path, held_lock: Callable[[Node, str], None]
) -> None:
    builder = make_node(tmp_path, shared, "workers-1")
    waiter = make_node(tmp_path, shared, "workers-2")
    held_lock(waiter, "workers-1")
    calls: list[float] = []

    class FinishWhileWaiting(RetryPolicy):
        def call(self, action: Any, *, what: str, retry_on: Any = (NotReady,), **_: Any) -> Any:
            def sleep(seconds: float) -> None:  # the builder completes during the first wait
                calls.append(seconds)
                if len(calls) == 1:
                    env = env_of(builder)
                    touch(builder.root, env + "/bin/python")
                    touch(builder.root, env + "/.complete", json.dumps(plan_env(builder, builder.options.pytorch).spec))  # type: ignore[arg-type]

            return super().call(action, what=what, retry_on=retry_on, sleep=sleep)

    step = PytorchEnvironment(wait=FinishWhileWaiting(attempts=5, base_s=0.0, cap_s=0.0, deadline_s=5.0))
    step.apply(waiter)
    assert len(calls) == 1
    assert runner_of(waiter).commands == []
    assert waiter.path(PROFILE_SCRIPT).read_text() == profile_script(env_of(builder))


def test_a_failed_build_is_removed_and_releases_the_lock(tmp_path: Path, shared: Path) -> None:
    node = make_node(tmp_path, shared, fail=("/fsx",))
    env = env_of(node)
    runner_of(node).fail = (env + "/bin/pip",)
    with pytest.raises(StepFailed, match=r"building the PyTorch environment .* failed: .*No matching distribution"):
        PytorchEnvironment(wait=FAST).apply(node)
    assert not node.path(env).exists()
    assert not node.path(PROFILE_SCRIPT).exists()
    # the lock is free again: the next attempt builds
    runner_of(node).fail = None
    runner_of(node).respond.clear()
    PytorchEnvironment(wait=FAST).apply(node)
    assert node.path(env + "/.complete").exists()


def test_the_wrong_torch_is_not_accepted(tmp_path: Path, shared: Path) -> None:
    node = make_node(tmp_path, shared, torch="2.6.0+cu124")
    with pytest.raises(StepFailed, match=r"imports torch '2\.6\.0\+cu124', not the requested 2\.5\.1"):
        PytorchEnvironment(wait=FAST).apply(node)
    assert not node.path(env_of(node)).exists()


def test_any_change_of_the_spec_is_a_new_environment(tmp_path: Path, shared: Path) -> None:
    a = make_node(tmp_path / "a", shared)
    b = make_node(
        tmp_path / "b", shared, pytorch={"version": "2.5.1", "index_url": CU124, "packages": ["numpy==2.2.0"]}
    )
    c = make_node(tmp_path / "c", shared, python="3.12")
    assert len({env_of(a), env_of(b), env_of(c)}) == 3


def test_no_index_url_means_plain_pinned_torch(tmp_path: Path, shared: Path) -> None:
    node = make_node(tmp_path, shared, pytorch={"version": "2.5.1"})
    env = env_of(node)
    PytorchEnvironment(wait=FAST).apply(node)
    assert runner_of(node).ran(env + "/bin/pip") == [[env + "/bin/pip", *PIP, "torch==2.5.1"]]


def test_describe_lists_the_build(tmp_path: Path, shared: Path) -> None:
    node = make_node(tmp_path, shared)
    env = env_of(node)
    actions = PytorchEnvironment(wait=FAST).describe(node)
    assert actions[0].startswith(f"build {env} once for the cluster under the lock {SHARED}/locks/")
    assert actions[1] == "/usr/bin/python3.10 -m venv " + env
    assert (
        actions[2]
        == f"{env}/bin/pip install --no-cache-dir --disable-pip-version-check --index-url {CU124} torch==2.5.1"
    )
    assert actions[-2] == f"write {env}/.complete (the spec) last"
    assert actions[-1].startswith("write " + PROFILE_SCRIPT)
    assert runner_of(node).commands == []


def test_pytorch_steps_only_with_the_option(tmp_path: Path) -> None:
    assert pytorch_steps(fake_node(tmp_path / "a")) == []
    steps = pytorch_steps(fake_node(tmp_path / "b", options={"pytorch": {"version": "2.5.1"}}))
    assert [type(s) for s in steps] == [PytorchEnvironment]


# --- Neuron and the SageMaker extras ----------------------------------------------------------------


def test_trainium_nodes_get_the_pinned_torch_neuronx_stack(tmp_path: Path, shared: Path) -> None:
    node = make_node(tmp_path, shared, pytorch={"version": "2.9.0", "index_url": CU124}, torch="2.9.0+cpu", neuron=True)
    env = env_of(node)
    PytorchEnvironment(wait=FAST).apply(node)
    assert runner_of(node).commands == [
        ["/usr/bin/python3.10", "-m", "venv", env],
        [env + "/bin/pip", *PIP, "--extra-index-url", NEURON_PIP_INDEX, "torch==2.9.0", TORCH_NEURONX, NEURONX_CC],
        [env + "/bin/python", "-c", "import torch, torch_neuronx; print(torch.__version__)"],
    ]
    assert TORCH_NEURONX == "torch-neuronx==2.9.0.2.12.22436"
    assert NEURON_TORCH_SERIES == "2.9"  # derived from the pin above
    assert json.loads(node.path(env + "/.complete").read_text())["flavor"] == "neuron"
    cpu = make_node(tmp_path / "login", shared, "login-1", pytorch={"version": "2.9.0", "index_url": CU124})
    assert env_of(cpu) != env  # CPU/GPU nodes get the default flavour, in its own environment


def test_the_pytorch_line_on_trainium_is_left_to_the_config_rules(tmp_path: Path, shared: Path) -> None:
    """The config decides it (RT-PYTORCH-NEURON, checked before deploy); the node only checks its Python."""
    node = make_node(tmp_path, shared, pytorch={"version": "2.10.0"}, neuron=True)
    assert plan_env(node, node.options.pytorch).problems == []  # type: ignore[arg-type]


def test_smp_is_refused_before_deployment_with_the_alternative() -> None:
    [problem] = options_problems({"pytorch": {"version": "2.5.1", "smp": True}})
    assert re.search(r"options\.pytorch\.smp: .*conda build of PyTorch.*SMP container", problem)
    assert problem.rule == "RT-PYTORCH-SMP"


def test_smddp_installs_the_published_wheel(tmp_path: Path, shared: Path) -> None:
    node = make_node(tmp_path, shared, pytorch={"version": "2.2.0", "smddp": True}, torch="2.2.0+cu121")
    env = env_of(node)
    PytorchEnvironment(wait=FAST).apply(node)
    wheel = "https://smdataparallel.s3.amazonaws.com/binary/pytorch/2.2.0/cu121/2024-03-04/smdistributed_dataparallel-2.2.0-cp310-cp310-linux_x86_64.whl"
    assert runner_of(node).ran(env + "/bin/pip") == [
        [env + "/bin/pip", *PIP, "torch==2.2.0"],
        [env + "/bin/pip", *PIP, wheel],
    ]
    assert json.loads(node.path(env + "/.complete").read_text())["smddp_wheel"] == wheel


@pytest.mark.parametrize(
    ("pytorch", "python", "neuron", "expected"),
    [
        (
            {"version": "2.5.1", "smddp": True},
            "3.10",
            False,
            r"no SMDDP wheel is published for torch 2\.5\.1 with Python 3\.10",
        ),
        ({"version": "2.4.1", "smddp": True}, "3.10", False, r"published: .*torch 2\.4\.1 \+ Python 3\.11"),
        ({"version": "2.0.1", "smddp": True}, "3.10", False, r"needs the cu118 build of torch.*whl/cu118"),
        (
            {"version": "2.2.0", "smddp": True, "index_url": "https://download.pytorch.org/whl/cu118"},
            "3.10",
            False,
            r"built for cu121 but index_url .* serves cu118",
        ),
        (
            {"version": "2.9.0"},
            "3.8",
            True,
            r"Python 3\.8; the pinned torch-neuronx exists for Python 3\.10, 3\.11, 3\.12",
        ),
    ],
)
def test_unsupported_combinations_fail_clearly(
    tmp_path: Path, shared: Path, pytorch: dict[str, Any], python: str, neuron: bool, expected: str
) -> None:
    node = make_node(tmp_path, shared, pytorch=pytorch, python=python, neuron=neuron)
    with pytest.raises(StepFailed, match=expected):
        PytorchEnvironment(wait=FAST).apply(node)
    assert runner_of(node).commands == []


def test_the_smddp_table_names_real_release_wheels() -> None:
    for wheel in SMDDP_WHEELS:
        assert wheel.url.startswith(
            f"https://smdataparallel.s3.amazonaws.com/binary/pytorch/{wheel.torch}/{wheel.cuda}/"
        )
        tag = "cp" + wheel.python.replace(".", "")
        assert wheel.url.endswith(f"-{tag}-{tag}-linux_x86_64.whl")
