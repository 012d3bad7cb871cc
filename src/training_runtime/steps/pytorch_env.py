"""One PyTorch virtual environment per cluster, on the shared file system, built by one node.

The environment lives at ``<shared_dir>/envs/pytorch-<version>-<hash>``, where the hash covers everything
that decides its content (the ``pytorch`` options, the interpreter's version, and whether it is the
Neuron or the default flavour), so a changed option builds a new environment beside the old one and
never changes one in use. Building takes minutes, so exactly one node builds:

* a node takes ``<shared_dir>/locks/<env name>.lock`` with ``flock`` (FSx for Lustre is mounted with
  ``flock``, which makes the lock cluster-wide; a node that dies loses its lock with it);
* the builder removes any half-built directory a dead builder left, builds, checks ``import torch``, and
  writes the ``.complete`` marker (the spec, as JSON) last;
* a node that finds the marker does nothing; one that finds the lock held waits, re-checking, until the
  marker appears or the wait runs out.

Every node then points ``/etc/profile.d/hyperpod-cdk-pytorch.sh`` at the environment.

Flavours. GPU and CPU nodes get ``torch==<version>`` (from ``index_url`` when given, e.g. a
download.pytorch.org CUDA index; never an unpinned torch). Trainium nodes get the pinned torch-neuronx
stack instead (PyTorch/XLA; see :data:`TORCH_NEURONX`): PyTorch 2.9 is the last PyTorch/XLA release
for training on Trainium - Neuron 2.30 dropped PyTorch/XLA training and its successor (native PyTorch,
"TorchNeuron") targets Trn2/Trn3 only - so a cluster with trn1 nodes must ask for PyTorch 2.9.x.
``index_url`` does not apply there (it usually names a CUDA index).

SageMaker extras. SMDDP is a wheel per (PyTorch, CUDA, Python) release: :data:`SMDDP_WHEELS` lists the
published ones; other combinations fail with the list. SMP v2 (``torch.sagemaker``) is published only as
a conda build of PyTorch and in the SMP container images, which a pip environment cannot host, so
``smp: true`` fails with the alternatives.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import shlex
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from training_runtime.accelerators import detect
from training_runtime.errors import StepFailed
from training_runtime.files import HolderLock, ensure_dir, file_matches, read_text, write_file
from training_runtime.log import log
from training_runtime.node import Node
from training_runtime.options import PytorchOptions
from training_runtime.paths import PYTORCH_ENV_VARIABLE as ENV_VARIABLE
from training_runtime.pins import (
    NEURON_PIP_INDEX,
    NEURON_PYTHONS,
    NEURONX_CC,
    SMDDP_WHEELS,
    TORCH_NEURONX,
    SmddpWheel,
)
from training_runtime.retry import NotReady, RetryPolicy
from training_runtime.run import CommandError
from training_runtime.steps import Step

PROFILE_SCRIPT = "/etc/profile.d/hyperpod-cdk-pytorch.sh"
MARKER = ".complete"
PIP_TIMEOUT_S = 3600.0
BUILD_WAIT = RetryPolicy(attempts=None, base_s=5.0, cap_s=30.0, deadline_s=7200.0)
"""How long a node waits for another node's build: two hours, checking at most every 30 s."""

NEURON = "neuron"
DEFAULT = "default"

_PYTHON_NAME = re.compile(r"^python(\d+\.\d+)$")
_CUDA_INDEX = re.compile(r"^(cu\d+|cpu|rocm[\d.]+)$")


@dataclass(frozen=True)
class Interpreter:
    command: str
    """Absolute path (on the node) of the interpreter that creates the venv, or ``python3``."""
    version: Optional[str]
    """``3.10``; None when it cannot be told."""


def interpreter(node: Node) -> Interpreter:
    """The node's ``python3``, resolved through symlinks (``/usr/bin/python3 -> python3.10``) under the root.

    Read from the file system where the name tells the version; asked (``-c``) only where it does not.
    """
    path = node.which("python3")
    if path is None:
        return Interpreter("python3", None)
    target = path
    for _ in range(16):
        host = node.path(target)
        if not host.is_symlink():
            break
        link = os.readlink(str(host))
        target = link if link.startswith("/") else posixpath.normpath(posixpath.join(posixpath.dirname(target), link))
    match = _PYTHON_NAME.fullmatch(posixpath.basename(target))
    if match:
        return Interpreter(target, match.group(1))
    result = node.run([target, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], check=False, timeout=60)
    version = result.stdout.strip()
    return Interpreter(target, version if result.ok and re.fullmatch(r"^\d+\.\d+$", version) else None)


def smddp_wheel(torch: str, python: Optional[str]) -> Optional[SmddpWheel]:
    return next((w for w in SMDDP_WHEELS if w.torch == torch and w.python == python), None)


@dataclass(frozen=True)
class EnvPlan:
    """Everything about this node's environment, computed from the options and the node (no changes)."""

    env: str
    spec: Dict[str, Any]
    python: Interpreter
    commands: List[List[str]]
    check: List[str]
    """Run last: prints torch's version, which must start with the requested one."""
    problems: List[str]

    @property
    def marker(self) -> str:
        return self.env + "/" + MARKER

    @property
    def name(self) -> str:
        return posixpath.basename(self.env)


def plan_env(node: Node, options: PytorchOptions) -> EnvPlan:
    python = interpreter(node)
    flavor = NEURON if detect(node).neuron_devices else DEFAULT
    spec: Dict[str, Any] = {
        "torch": options.version,
        "index_url": options.index_url,
        "packages": list(options.packages),
        "smp": options.smp,
        "smddp": options.smddp,
        "flavor": flavor,
        "python": python.version,
    }
    if flavor == NEURON:
        spec["neuron"] = [NEURON_PIP_INDEX, TORCH_NEURONX, NEURONX_CC]
    wheel = smddp_wheel(options.version, python.version) if options.smddp else None
    if wheel is not None:
        spec["smddp_wheel"] = wheel.url
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    env = "{}/envs/pytorch-{}-{}".format(node.shared_dir, options.version, digest)
    problems = _problems(node, options, python, flavor, wheel)
    pip = [env + "/bin/pip", "install", "--no-cache-dir", "--disable-pip-version-check"]
    torch = "torch==" + options.version
    commands = [[python.command, "-m", "venv", env]]
    if flavor == NEURON:
        neuron_index = ["--extra-index-url", NEURON_PIP_INDEX]
        commands.append(pip + neuron_index + [torch, TORCH_NEURONX, NEURONX_CC])
        if options.packages:
            commands.append(pip + neuron_index + [torch, TORCH_NEURONX, *options.packages])
        check = "import torch, torch_neuronx; print(torch.__version__)"
    else:
        index = options.index_url
        commands.append(pip + (["--index-url", index] if index else []) + [torch])
        if options.packages:
            # torch pinned again so no package can move it; the index stays available for torchvision & co.
            commands.append(pip + (["--extra-index-url", index] if index else []) + [torch, *options.packages])
        if wheel is not None:
            commands.append([*pip, wheel.url])
        check = "import torch; print(torch.__version__)"
    return EnvPlan(
        env=env,
        spec=spec,
        python=python,
        commands=commands,
        check=[env + "/bin/python", "-c", check],
        problems=problems,
    )


def _problems(
    node: Node, options: PytorchOptions, python: Interpreter, flavor: str, wheel: Optional[SmddpWheel]
) -> List[str]:
    problems: List[str] = []
    if node.which("python3") is None:
        problems.append("python3 is not installed on this node; the PyTorch environment needs it")
    elif python.version is None:
        problems.append("cannot tell the version of {} (the environment is keyed by it)".format(python.command))
    if flavor == NEURON:
        # The PyTorch line and SMDDP against Trainium are decided by the config and checked before deploy
        # (hyperpod_cdk.rules.runtime); only the node knows its Python.
        if python.version is not None and python.version not in NEURON_PYTHONS:
            problems.append(
                "{} is Python {}; the pinned torch-neuronx exists for Python {} only. Fix: use an AMI with one of "
                "those (Ubuntu 22.04: 3.10, 24.04: 3.12)".format(
                    python.command, python.version, ", ".join(NEURON_PYTHONS)
                )
            )
    elif options.smddp:
        problems.extend(_smddp_problems(options, python, wheel))
    return problems


def _smddp_problems(options: PytorchOptions, python: Interpreter, wheel: Optional[SmddpWheel]) -> List[str]:
    if wheel is None:
        known = ", ".join("torch {} + Python {}".format(w.torch, w.python) for w in SMDDP_WHEELS)
        return [
            "pytorch.smddp: no SMDDP wheel is published for torch {} with Python {} (published: {}). Fix: choose "
            "a listed torch version on an AMI with that Python, or set smddp: false".format(
                options.version, python.version, known
            )
        ]
    index = (options.index_url or "").rstrip("/")
    tag = index.rsplit("/", 1)[-1] if index else ""
    if _CUDA_INDEX.fullmatch(tag) and tag != wheel.cuda:
        return [
            "pytorch.smddp: the SMDDP wheel for torch {} is built for {} but index_url {} serves {} builds. Fix: "
            "set index_url to https://download.pytorch.org/whl/{}".format(
                wheel.torch, wheel.cuda, options.index_url, tag, wheel.cuda
            )
        ]
    if not index and not wheel.pypi_matches:
        return [
            "pytorch.smddp: the SMDDP wheel for torch {} needs the {} build of torch, which PyPI does not serve. "
            "Fix: set index_url to https://download.pytorch.org/whl/{}".format(wheel.torch, wheel.cuda, wheel.cuda)
        ]
    return []


def profile_script(env: str) -> str:
    bin_dir = shlex.quote(env + "/bin")
    return (
        "# Managed by hyperpod-cdk: the cluster's PyTorch environment (on shared storage).\n"
        "export {}={}\n"
        'case ":${{PATH}}:" in\n'
        "    *:{}:*) ;;\n"
        '    *) export PATH={}:"${{PATH}}" ;;\n'
        "esac\n"
    ).format(ENV_VARIABLE, shlex.quote(env), bin_dir, bin_dir)


class PytorchEnvironment(Step):
    """The cluster's PyTorch environment exists (built once, by one node) and this node's shells use it."""

    name = "pytorch-environment"

    def __init__(self, wait: Optional[RetryPolicy] = None) -> None:
        self.wait = wait or BUILD_WAIT

    def plan(self, node: Node) -> EnvPlan:
        options = node.options.pytorch
        if options is None:
            raise StepFailed("the pytorch option is not set; this step should not be in the plan")
        return plan_env(node, options)

    def complete(self, node: Node, plan: EnvPlan) -> bool:
        text = read_text(node, plan.marker)
        try:
            return text is not None and bool(json.loads(text) == plan.spec)
        except ValueError:
            return False

    def needed(self, node: Node) -> bool:
        plan = self.plan(node)
        return not self.complete(node, plan) or not file_matches(node, PROFILE_SCRIPT, profile_script(plan.env))

    def apply(self, node: Node) -> None:
        plan = self.plan(node)
        if not self.complete(node, plan):
            if plan.problems:
                raise StepFailed("cannot build the PyTorch environment: " + "; ".join(plan.problems))
            self.build_or_wait(node, plan)
        write_file(node, PROFILE_SCRIPT, profile_script(plan.env), mode=0o644)

    def lock_path(self, node: Node, plan: EnvPlan) -> str:
        return "{}/locks/{}.lock".format(node.shared_dir, plan.name)

    def build_or_wait(self, node: Node, plan: EnvPlan) -> None:
        ensure_dir(node, node.shared_dir + "/envs", mode=0o755)
        ensure_dir(node, node.shared_dir + "/locks", mode=0o755)
        lock_path = self.lock_path(node, plan)
        started = time.monotonic()

        def attempt() -> None:
            if self.complete(node, plan):
                return
            lock = HolderLock(node.path(lock_path))
            if not lock.acquire():
                raise NotReady("{} is being built by another node ({})".format(plan.env, self.holder(node, lock_path)))
            try:
                if self.complete(node, plan):
                    return
                lock.record(
                    json.dumps({"instance": node.instance.name, "host": socket.gethostname(), "since": time.time()})
                )
                self.build(node, plan)
            finally:
                lock.release()

        try:
            self.wait.call(attempt, what="pytorch environment " + plan.name)
        except NotReady as error:
            raise StepFailed(
                "gave up after {:.0f} s waiting for the PyTorch environment {}: {}. The lock is {}; a node that "
                "dies while building releases it. Fix: look at the building node's log; rerun the bootstrap "
                "once it has finished or failed".format(time.monotonic() - started, plan.env, error, lock_path)
            ) from None

    def holder(self, node: Node, lock_path: str) -> str:
        text = (read_text(node, lock_path) or "").strip()
        try:
            record = json.loads(text) if text else {}
        except ValueError:
            record = {}
        if not isinstance(record, dict) or "instance" not in record:
            return "holder unknown"
        return "held by {} since {}".format(
            record["instance"], time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(record.get("since", 0))))
        )

    def build(self, node: Node, plan: EnvPlan) -> None:
        """Under the lock: clear what a dead builder left, build, check, write the marker last."""
        host = node.path(plan.env)
        if host.exists() or host.is_symlink():
            log("pytorch_env_stale", env=plan.env, note="no .complete marker; removing and rebuilding")
            _remove(host)
        log("pytorch_env_build", env=plan.env, flavor=plan.spec["flavor"], torch=plan.spec["torch"])
        try:
            for argv in plan.commands:
                node.run(argv, timeout=PIP_TIMEOUT_S)
            result = node.run(plan.check, timeout=300)
        except CommandError as error:
            _remove(host)
            raise StepFailed(
                "building the PyTorch environment {} failed: {}. The partial environment was removed".format(
                    plan.env, error
                )
            ) from None
        version = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
        if version.split("+")[0] != plan.spec["torch"]:
            _remove(host)
            raise StepFailed(
                "the environment {} imports torch {!r}, not the requested {}; removed it".format(
                    plan.env, version, plan.spec["torch"]
                )
            )
        write_file(node, plan.marker, json.dumps(plan.spec, indent=2, sort_keys=True) + "\n", mode=0o644)
        log("pytorch_env_ready", env=plan.env, torch=version)

    def describe(self, node: Node) -> List[str]:
        plan = self.plan(node)
        actions: List[str] = []
        if not self.complete(node, plan):
            if plan.problems:
                return ["FAIL: " + problem for problem in plan.problems]
            actions.append(
                "build {} once for the cluster under the lock {} (or wait for the node building it)".format(
                    plan.env, self.lock_path(node, plan)
                )
            )
            actions += [" ".join(argv) for argv in plan.commands]
            actions.append(" ".join(plan.check))
            actions.append("write {} (the spec) last".format(plan.marker))
        if not file_matches(node, PROFILE_SCRIPT, profile_script(plan.env)):
            actions.append("write {} ({}={})".format(PROFILE_SCRIPT, ENV_VARIABLE, plan.env))
        return actions


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(str(path))


def pytorch_steps(node: Node) -> List[Step]:
    """The PyTorch environment step when the ``pytorch`` option is set; none otherwise."""
    return [PytorchEnvironment()] if node.options.pytorch is not None else []
