"""``python3 -m training_runtime launch [--dry-run] -- SCRIPT ARGS``: srun + torchrun, built from the allocation.

Run it from a batch script (``sbatch``), on the first node of the allocation. It works in two stages:

1. **In the batch script** it reads the Slurm environment and the node facts bootstrap wrote
   (:mod:`training_runtime.facts`), sets the instance family's environment (:data:`FAMILIES`), and execs
   ``srun`` with one task per node - adding ``--auto-resume=1`` on HyperPod, where HyperPod then replaces
   a failed node and retries the step; elsewhere recovery is Slurm's requeue (``#SBATCH --requeue``).
2. **On every node** ``srun`` starts ``launch --on-node``, which execs ``torchrun`` with a c10d rendezvous
   on the *first node of the step's node list, by host name*. It is worked out there, when the step
   starts, not in the batch script: when HyperPod retries a step on a replaced node, the node list is the
   new one, and a rendezvous pinned to the old first node's address would wait for a host that is gone
   (awsome-distributed-ai PR #407). ``--rdzv-id`` is the job id, which a requeued job keeps. torchrun is
   started with :data:`~training_runtime.checkpoint.interrupt.CHECKPOINT_SIGNAL` ignored: Slurm delivers a
   step signal to every process of the step, torchrun would die of it, and an ignored signal stays ignored
   across ``exec`` and in the workers, so only a script that installs
   :class:`~training_runtime.checkpoint.StopRequest` sees the Spot watcher's request to checkpoint.

``--dry-run`` prints the environment, the srun command and the torchrun command each node will run,
exactly as they would be executed, and runs nothing. ``--container-image`` runs each node's task in a
container through pyxis (:mod:`training_runtime.launch_container`). Checkpoints are asynchronous and tiered
unless ``--sync-checkpoints`` (:mod:`training_runtime.launch_checkpoint`: what is exported for the ranks, and
the checkpointer, budget check and stop handling the example jobs use).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from training_runtime.checkpoint.interrupt import CHECKPOINT_SIGNAL
from training_runtime.facts import FactsError, NodeFacts, facts_from, load_facts
from training_runtime.hardware import hardware_for
from training_runtime.launch_checkpoint import add_arguments as add_checkpoint_arguments
from training_runtime.launch_checkpoint import environment as checkpoint_environment
from training_runtime.launch_container import add_arguments, container_from, node_environment
from training_runtime.launch_container import plan as container_plan
from training_runtime.node import HYPERPOD, platform_at
from training_runtime.paths import PYTORCH_ENV_VARIABLE, RUNTIME_DIR_ON_SHARED
from training_runtime.render.hostlist import expand

RDZV_PORT = 29400
"""torchrun's default c10d port."""
MAX_RESTARTS_GENERIC = 2
"""torchrun restarts of the local workers after a process failure, off HyperPod (HyperPod retries the step)."""
PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)
FAILED = 2

EFA_LIBRARY_PATH = "/opt/amazon/efa/lib:/opt/amazon/openmpi/lib:/opt/amazon/ofi-nccl/lib"
"""Where the EFA installer puts libfabric and the aws-ofi-nccl plugin; NCCL finds the plugin on this path."""

NVIDIA_EFA: Dict[str, str] = {
    "FI_PROVIDER": "efa",
    "NCCL_SOCKET_IFNAME": "^docker,lo,veth",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "LD_LIBRARY_PATH": EFA_LIBRARY_PATH,
}
"""p4d/p5: with libfabric >= 1.18 and aws-ofi-nccl >= 1.7 the plugin sets the per-platform NCCL values
itself; the socket interface is an exclusion list (HyperPod's NICs are ens6/enp40s0, never eth0)."""

NEURON_EFA: Dict[str, str] = {
    "FI_PROVIDER": "efa",
    "FI_EFA_USE_DEVICE_RDMA": "1",
    "FI_EFA_FORK_SAFE": "1",
    "MALLOC_ARENA_MAX": "64",
    "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "3",
    "LD_LIBRARY_PATH": EFA_LIBRARY_PATH,
}
"""trn1/trn2 (Neuron multi-node guide and NxD scripts); FI_EFA_FORK_SAFE is required on kernels < 5.15."""


@dataclass(frozen=True)
class Family:
    name: str
    prefixes: Tuple[str, ...]
    """Instance types (``ml.p5.48xlarge``) that start with one of these belong to the family."""
    environment: Mapping[str, str]


FAMILIES: Tuple[Family, ...] = (
    Family("p4d", ("ml.p4d.", "ml.p4de."), NVIDIA_EFA),
    Family("p5", ("ml.p5.", "ml.p5e.", "ml.p5en."), NVIDIA_EFA),
    Family("trn1", ("ml.trn1.", "ml.trn1n."), NEURON_EFA),
    Family("trn2", ("ml.trn2.",), NEURON_EFA),
)
"""The one table of per-family environments. Other instance types (CPU, g5 ...) get none."""
OTHER = Family("other", (), {})

FORBIDDEN = ("NCCL_PROTO", "NCCL_ALGO", "RDMAV_FORK_SAFE")
"""Never passed on: aws-ofi-nccl's tuner refuses to load when NCCL_PROTO/NCCL_ALGO are set (NCCL then
fails with "invalid argument", aws-ofi-nccl #982), and RDMAV_* breaks newer kernels."""
PATH_LIKE = ("LD_LIBRARY_PATH",)
"""Prepended to what the job already has instead of replacing it."""
EMULATED_VARIABLE = "HYPERPOD_CDK_EMULATED_HARDWARE"
"""Set to ``1`` for a job on emulated hardware (the local cluster): the family's accelerators are declared,
not present, so a script can tell (the family's own variables are set as on the real instance type)."""


class LaunchError(Exception):
    """The launch cannot be built; the message says what is missing and how to fix it."""


def family_of(instance_type: str) -> Family:
    return next((f for f in FAMILIES if instance_type.startswith(f.prefixes)), OTHER)


@dataclass(frozen=True)
class Launch:
    family: Family
    platform: str
    emulated_hardware: bool
    nodes: int
    nproc_per_node: int
    job_id: str
    first_node: str
    environment: Dict[str, str]
    """Variables the launcher sets (the job's own environment is passed on as well)."""
    dropped: Tuple[str, ...]
    srun: List[str]
    torchrun: List[str]
    """What each node runs, for this allocation's node list."""
    container_image: Optional[str] = None
    notes: Tuple[str, ...] = ()
    """What the user should know about the launch (a path the container does not see)."""


def _int(env: Mapping[str, str], *names: str) -> Optional[int]:
    for name in names:
        value = env.get(name, "").split("(")[0]
        if value.isdigit():
            return int(value)
    return None


def processes_per_node(facts: NodeFacts, env: Mapping[str, str]) -> int:
    """GPUs, else NeuronCores, else the CPUs Slurm allocated on this node (always the CPUs on emulated
    hardware: its accelerators are declared, not present)."""
    if facts.emulated_hardware:
        return _int(env, "SLURM_CPUS_ON_NODE") or facts.cpus or os.cpu_count() or 1
    if facts.gpus:
        return _int(env, "SLURM_GPUS_ON_NODE") or facts.gpus
    if facts.neuron_cores:
        return facts.neuron_cores
    return _int(env, "SLURM_CPUS_ON_NODE") or facts.cpus or os.cpu_count() or 1


def node_list(env: Mapping[str, str]) -> List[str]:
    for name in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        if env.get(name):
            return expand(env[name])
    raise LaunchError(
        "no node list in the environment (SLURM_JOB_NODELIST): launch runs inside a Slurm job. "
        "Fix: call it from an sbatch script"
    )


def family_environment(family: Family, env: Mapping[str, str]) -> Dict[str, str]:
    """The family's variables; a value the job already set wins, path lists are prepended."""
    result = {}
    for name, value in family.environment.items():
        if name in PATH_LIKE:
            result[name] = value + (":" + env[name] if env.get(name) else "")
        elif name not in env:
            result[name] = value
    return result


def torchrun_command(
    torchrun: str, nodes: int, nproc: int, first_node: str, job_id: str, max_restarts: int, script: Sequence[str]
) -> List[str]:
    return [
        torchrun,
        "--nnodes={}".format(nodes),
        "--nproc-per-node={}".format(nproc),
        "--rdzv-backend=c10d",
        "--rdzv-endpoint={}:{}".format(first_node, RDZV_PORT),
        "--rdzv-id={}".format(job_id),
        "--max-restarts={}".format(max_restarts),
        *script,
    ]


def find_torchrun(explicit: Optional[str], env: Mapping[str, str]) -> str:
    if explicit:
        return explicit
    managed = env.get(PYTORCH_ENV_VARIABLE)
    if managed and Path(managed, "bin", "torchrun").exists():
        return str(Path(managed, "bin", "torchrun"))
    found = shutil.which("torchrun", path=env.get("PATH"))
    if found:
        return found
    raise LaunchError(
        "torchrun is not on PATH. Fix: activate the environment that has PyTorch (the cluster's shared one is "
        "set up by /etc/profile.d/hyperpod-cdk-pytorch.sh), or pass --torchrun PATH"
    )


def build(
    args: argparse.Namespace, env: Mapping[str, str], facts: NodeFacts, root: Path = Path("/"), cwd: str = ""
) -> Launch:
    if not args.script:
        raise LaunchError("no training script. Fix: python3 -m training_runtime launch -- train.py [ARGS]")
    job_id = env.get("SLURM_JOB_ID")
    if not job_id:
        raise LaunchError("SLURM_JOB_ID is not set: launch runs inside a Slurm job. Fix: call it from an sbatch script")
    hosts = node_list(env)
    nodes = _int(env, "SLURM_JOB_NUM_NODES", "SLURM_NNODES") or len(hosts)
    # HyperPod's srun has --auto-resume wherever its marker is, as AWS's samples test at job time; the facts
    # bootstrap wrote say the same on a HyperPod node.
    platform = HYPERPOD if platform_at(root) == HYPERPOD else facts.platform
    family = family_of(facts.instance_type)
    nproc = args.nproc_per_node or processes_per_node(facts, env)
    max_restarts = args.max_restarts
    if max_restarts is None:
        max_restarts = 0 if platform == HYPERPOD else MAX_RESTARTS_GENERIC
    container = container_from(args, root)
    if container:  # the image's torchrun; a host path means nothing in the container
        torchrun = args.torchrun or "torchrun"
    else:
        torchrun = find_torchrun(args.torchrun, env) if not args.dry_run else _dry_torchrun(args.torchrun, env)
    environment = family_environment(family, env)
    environment.update(checkpoint_environment(args, env, facts, container is not None))
    if facts.emulated_hardware:
        environment[EMULATED_VARIABLE] = "1"
    if family.environment is NEURON_EFA and facts.shared_mount and "NEURON_COMPILE_CACHE_URL" not in env:
        # Compiled graphs shared by every node: the first compile of a model takes minutes.
        environment["NEURON_COMPILE_CACHE_URL"] = "{}/{}/neuron-cache".format(
            facts.shared_mount.rstrip("/"), RUNTIME_DIR_ON_SHARED
        )
    python_path = env.get("PYTHONPATH", "")
    if PACKAGE_PARENT not in python_path.split(":") and not container:
        environment["PYTHONPATH"] = PACKAGE_PARENT + (":" + python_path if python_path else "")
    dropped = tuple(name for name in FORBIDDEN if name in env)
    container_options: List[str] = []
    on_node_options: List[str] = []
    program = [sys.executable, "-m", __package__ or "training_runtime", "launch"]
    notes: Tuple[str, ...] = ()
    if container:
        place = (cwd or os.getcwd(), args.script, root)
        extra = container_plan(container, environment, env, facts, family.environment, PATH_LIKE, PACKAGE_PARENT, place)
        container_options, program, on_node_options, notes = extra.srun_options, extra.entry, extra.options, extra.notes
    srun = ["srun"]
    if platform == HYPERPOD:
        srun.append("--auto-resume=1")
    srun += [
        "--nodes={}".format(nodes),
        "--ntasks={}".format(nodes),
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--export=ALL",
    ]
    cpus = _int(env, "SLURM_CPUS_ON_NODE")
    if cpus:
        srun.append("--cpus-per-task={}".format(cpus))
    srun += [
        *container_options,
        *program,
        "--on-node",
        "--nproc-per-node={}".format(nproc),
        "--max-restarts={}".format(max_restarts),
        "--torchrun={}".format(torchrun),
        *on_node_options,
        "--",
        *args.script,
    ]
    return Launch(
        family=family,
        platform=platform,
        emulated_hardware=facts.emulated_hardware,
        nodes=nodes,
        nproc_per_node=nproc,
        job_id=job_id,
        first_node=hosts[0],
        environment=environment,
        dropped=dropped,
        srun=srun,
        torchrun=torchrun_command(torchrun, nodes, nproc, hosts[0], job_id, max_restarts, args.script),
        container_image=container.image if container else None,
        notes=notes,
    )


def _dry_torchrun(explicit: Optional[str], env: Mapping[str, str]) -> str:
    try:
        return find_torchrun(explicit, env)
    except LaunchError:
        return "torchrun"


def render(launch: Launch) -> str:
    """The dry run's output: the exact environment and commands."""
    where = ", in container {}".format(launch.container_image) if launch.container_image else ""
    lines = [
        "# hyperpod-cdk launch: family {}, platform {}, {} node(s) x {} process(es), rendezvous {}:{} (job {})".format(
            launch.family.name + (" (emulated hardware)" if launch.emulated_hardware else ""),
            launch.platform,
            launch.nodes,
            launch.nproc_per_node,
            launch.first_node,
            RDZV_PORT,
            launch.job_id,
        )
        + where
    ]
    lines += ["# note: {}".format(note) for note in launch.notes]
    lines += ["unset {}  # breaks aws-ofi-nccl's tuner or the kernel's RDMA".format(n) for n in launch.dropped]
    lines += ["export {}={}".format(name, shlex.quote(value)) for name, value in sorted(launch.environment.items())]
    lines.append(" ".join(shlex.quote(part) for part in launch.srun))
    lines.append("# then on each node:")
    lines.append(" ".join(shlex.quote(part) for part in launch.torchrun))
    return "\n".join(lines) + "\n"


def on_node(args: argparse.Namespace, env: Mapping[str, str]) -> List[str]:
    """Stage 2, on every node of the step: the torchrun command for the step's current node list."""
    hosts = node_list(env)
    job_id = env.get("SLURM_JOB_ID", "")
    nodes = _int(env, "SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES") or len(hosts)
    return torchrun_command(
        args.torchrun or "torchrun", nodes, args.nproc_per_node, hosts[0], job_id, args.max_restarts or 0, args.script
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python3 -m training_runtime launch",
        description="Start a torchrun job on every node of the Slurm allocation (run it from an sbatch script).",
    )
    p.add_argument("--dry-run", action="store_true", help="print the environment and commands; run nothing")
    p.add_argument("--nproc-per-node", type=int, help="processes per node (default: GPUs, NeuronCores or CPUs)")
    p.add_argument("--max-restarts", type=int, help="torchrun worker restarts (default: 0 on HyperPod, else 2)")
    p.add_argument("--torchrun", help="torchrun to use (default: the cluster's PyTorch environment, then PATH)")
    p.add_argument("--instance-type", help="instead of the node facts' instance type (e.g. ml.p5.48xlarge)")
    p.add_argument("--on-node", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)
    add_checkpoint_arguments(p)
    add_arguments(p)
    p.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS]: the training script and its arguments")
    return p


def parse(argv: Sequence[str]) -> argparse.Namespace:
    args = parser().parse_args(list(argv))
    if args.script and args.script[0] == "--":
        args.script = args.script[1:]
    if args.nproc_per_node is not None and args.nproc_per_node < 1:
        raise LaunchError("--nproc-per-node: got {}; allowed: 1 or more".format(args.nproc_per_node))
    if args.max_restarts is not None and args.max_restarts < 0:
        raise LaunchError("--max-restarts: got {}; allowed: 0 or more".format(args.max_restarts))
    return args


def facts_for(args: argparse.Namespace) -> NodeFacts:
    """The bootstrap's node facts, or - with ``--instance-type`` - that type's figures from the hardware table."""
    if not args.instance_type:
        return load_facts(args.root)
    hardware = hardware_for(args.instance_type, {})
    if hardware is None:
        raise LaunchError(
            "--instance-type: {!r} is not in the hardware table. Fix: use a HyperPod type such as "
            "ml.p5.48xlarge, or run on a bootstrapped node without --instance-type".format(args.instance_type)
        )
    return facts_from(
        hardware,
        cluster="",
        instance_name="",
        instance_type=args.instance_type,
        group="",
        role="compute",
        platform=platform_at(args.root),
        shared_mount=None,
    )


def main(argv: Sequence[str]) -> int:
    env = dict(os.environ)
    try:
        args = parse(argv)
        if args.on_node:
            command = on_node(args, env)
            signal.signal(CHECKPOINT_SIGNAL, signal.SIG_IGN)
            os.execvpe(command[0], command, node_environment(args, env, FORBIDDEN))
        launch = build(args, env, facts_for(args), args.root)
    except (LaunchError, FactsError, ValueError) as error:
        sys.stderr.write("hyperpod-cdk launch: {}\n".format(error))
        return FAILED
    if args.dry_run:
        sys.stdout.write(render(launch))
        return 0
    sys.stderr.write(render(launch))
    sys.stderr.flush()
    for name in launch.dropped:
        env.pop(name, None)
    env.update(launch.environment)
    os.execvpe(launch.srun[0], launch.srun, env)
    return FAILED  # not reached
