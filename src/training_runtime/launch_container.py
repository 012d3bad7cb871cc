"""The launcher's container path: ``launch --container-image IMAGE [--container-mounts SRC:DST[:FLAGS],...]``.

Each node's task runs in a container through pyxis, the Slurm SPANK plugin that adds ``--container-*``
options to ``srun`` and runs the task with enroot (https://github.com/NVIDIA/pyxis, README "Usage" and
``args.c``). The shape is that of AWS's HyperPod Slurm samples (aws-samples/awsome-distributed-training,
e.g. ``3.test_cases/megatron/megatron-lm/slurm/gpt3/2.distributed-training.sbatch`` and
``3.test_cases/16.pytorch-cpu-ddp/slurm/3.container-train.sbatch``): ``srun [--auto-resume=1]
--container-image IMAGE --container-mounts /fsx:/fsx ... torchrun --rdzv-backend=c10d ...``. What the
launcher adds to that shape:

* **Mounts by default**: the cluster's shared file system (``/fsx``: data, checkpoints, the Neuron
  compile cache) read-write, and the runtime's own install directory read-only, so the on-node stage and a
  training script that imports :mod:`training_runtime.checkpoint` work in any image. Mounts are ordered
  parents first (enroot mounts in order, a child mounted before its parent would be hidden).
* **The environment reaches the container.** pyxis passes the job's environment, but "their existing
  values in the image take precedence" (``--container-env`` in ``args.c``; ``tests/env.bats``). The
  family's variables are therefore named in ``--container-env``, so the launcher's (or the job's) value
  wins over the image's. Path lists are the exception: the host's ``LD_LIBRARY_PATH`` or ``PYTHONPATH``
  would replace the image's own (its CUDA or framework paths), so the on-node stage, inside the container,
  *prepends* the family's library directories and the runtime to the image's values instead. It also
  unsets ``NCCL_PROTO``/``NCCL_ALGO``/``RDMAV_FORK_SAFE`` when the image sets them (the launcher never
  passes them on).
* **No GPU, no NVIDIA hook**: on nodes without GPUs (CPU, Trainium, emulated hardware)
  ``NVIDIA_VISIBLE_DEVICES=void``, as AWS's CPU container sample sets it, so a CUDA-based image starts
  (enroot's NVIDIA hook acts on that variable).
* ``--no-container-mount-home`` unless ``--container-mount-home``: what is in the container does not depend
  on the node's enroot settings (pyxis leaves home mounting to enroot's ``ENROOT_MOUNT_HOME`` otherwise).
* ``--container-workdir``: the batch script's working directory as the container sees it, when a mount
  covers it (otherwise the image's ``WORKDIR``, pyxis's default, ``tests/workdir.bats``).

Rendezvous and auto-resume are untouched: the srun options before the container's are the same as without
a container, and the on-node stage still works out the c10d endpoint from the step's node list.

The image reference is the user's and is printed as given; a reference with credentials in it
(``user:password@registry#image``) is refused without echoing it - enroot reads registry credentials from
its ``.credentials`` file (enroot's ``doc/cmd/import.md``).
"""

from __future__ import annotations

import argparse
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from training_runtime.facts import NodeFacts

SCHEMES = ("docker://", "dockerd://", "podman://")
"""enroot's import schemes that pyxis accepts in ``--container-image`` (``tests/docker_image.bats``)."""
DIGEST = re.compile(r"^[a-z0-9]+:[0-9a-fA-F]{32,}$")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
NAME_FLAGS = ("auto", "create", "exec", "no_exec")
"""pyxis's ``--container-name NAME[:FLAG]`` flags (``args.c``)."""
MOUNT_FLAG = re.compile(r"^[a-z][a-z0-9_=-]*$")
"""One enroot mount option (``ro``, ``rprivate``, ``x-create=dir``); pyxis joins them with ``+``."""
NO_GPU_DEVICES = "void"
"""``NVIDIA_VISIBLE_DEVICES`` on nodes without GPUs (AWS's ``16.pytorch-cpu-ddp`` container sample)."""
ENTRY = "import sys; sys.path.insert(0, {!r}); from training_runtime.launch import main; sys.exit(main(sys.argv[1:]))"
"""The on-node stage inside the container: the image's ``python3``, the runtime from its read-only mount, and the
image's own ``PYTHONPATH`` kept (a forced host ``PYTHONPATH`` would replace it)."""


class ContainerError(ValueError):
    """A container option is wrong; the message lists every problem with its fix."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True)
class Mount:
    source: str
    destination: str
    flags: Tuple[str, ...] = ()

    def spec(self) -> str:
        """pyxis's ``SRC:DST[:FLAGS]``, flags joined with ``+``."""
        return ":".join([self.source, self.destination] + (["+".join(self.flags)] if self.flags else []))


@dataclass(frozen=True)
class Container:
    """The container options as given and checked (``--container-*``)."""

    image: str
    mounts: Tuple[Mount, ...]
    workdir: Optional[str]
    name: Optional[str]
    mount_home: bool


@dataclass(frozen=True)
class ContainerLaunch:
    """What the launcher adds for a container: srun's pyxis options and the on-node stage's entry."""

    srun_options: List[str]
    entry: List[str]
    """The program srun runs in the container, before ``launch --on-node ...``."""
    options: List[str]
    """The on-node stage's options: ``--in-container`` and the ``--prepend-env NAME=VALUE`` it applies in the image."""
    notes: Tuple[str, ...]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("container (pyxis and enroot, on the cluster's nodes)")
    group.add_argument(
        "--container-image",
        metavar="IMAGE",
        help="run each node's task in this image: an enroot URI ([USER@][REGISTRY#]IMAGE[:TAG], e.g. "
        "nvcr.io#nvidia/pytorch:24.12-py3) or an absolute path to a squashfs file on shared storage",
    )
    group.add_argument(
        "--container-mounts",
        metavar="SRC:DST[:FLAGS][,...]",
        help="more bind mounts (absolute paths; flags joined with '+', e.g. ro+rprivate); the shared file "
        "system and the runtime are mounted already",
    )
    group.add_argument("--container-workdir", metavar="PATH", help="working directory in the container")
    group.add_argument(
        "--container-name",
        metavar="NAME[:FLAG]",
        help="keep the container under this name on each node and reuse it (a retried step skips the import)",
    )
    group.add_argument(
        "--container-mount-home", action="store_true", help="mount your home directory (default: not mounted)"
    )
    group.add_argument("--in-container", action="store_true", help=argparse.SUPPRESS)
    group.add_argument("--prepend-env", action="append", default=[], metavar="NAME=VALUE", help=argparse.SUPPRESS)


def _path_problem(option: str, what: str, path: str) -> Optional[str]:
    if not path.startswith("/"):
        return "{}: {} {!r} is not an absolute path; allowed: an absolute path such as /fsx/data".format(
            option, what, path
        )
    if re.search(r"\s", path):
        return (
            "{}: {} {!r} contains white space; allowed: a path without spaces (enroot's mount table is "
            "split on them)".format(option, what, path)
        )
    return None


def parse_mounts(text: str) -> Tuple[Tuple[Mount, ...], List[str]]:
    """``SRC:DST[:FLAGS][,...]`` as pyxis reads it (``args.c``), with absolute paths only: a relative source
    is resolved against each task's working directory, which differs from node to node."""
    mounts: List[Mount] = []
    problems: List[str] = []
    option = "--container-mounts"
    for entry in text.split(","):
        parts = entry.split(":")
        if entry.strip() == "":
            problems.append("{}: an empty entry in {!r}; allowed: SRC:DST[:FLAGS] joined by ','".format(option, text))
            continue
        if len(parts) < 2:
            example = "{0}:{0}".format(entry) if entry.startswith("/") else "/fsx/data:/data"
            problems.append("{}: {!r} has no ':'; allowed: SRC:DST[:FLAGS], e.g. {}".format(option, entry, example))
            continue
        if len(parts) > 3:
            problems.append("{}: {!r} has more than two ':'; allowed: SRC:DST[:FLAGS]".format(option, entry))
            continue
        source, destination = parts[0], parts[1]
        flags = tuple(parts[2].split("+")) if len(parts) == 3 and parts[2] else ()
        found = [
            p for p in (_path_problem(option, "source", source), _path_problem(option, "destination", destination)) if p
        ]
        bad_flags = [f for f in flags if not MOUNT_FLAG.fullmatch(f)]
        if bad_flags:
            found.append(
                "{}: {!r}: mount flags {} are not enroot mount options; allowed: words such as ro, rw, "
                "rprivate, joined with '+'".format(option, entry, bad_flags)
            )
        if found:
            problems += found
            continue
        mounts.append(Mount(posixpath.normpath(source), posixpath.normpath(destination), flags))
    return tuple(mounts), problems


def image_problems(image: str, root: Path) -> List[str]:
    """The reference as pyxis and enroot read it: ``[SCHEME://][USER@][REGISTRY#]IMAGE[:TAG]`` or a squashfs path."""
    option = "--container-image"
    if image.startswith((".", "/")):
        if not image.startswith("/"):
            return [
                "{}: {!r} is a relative path; each node would resolve it against its own working directory. "
                "Fix: an absolute path on the shared file system, e.g. /fsx/images/pytorch.sqsh".format(option, image)
            ]
        if not (root / image.lstrip("/")).is_file():
            return [
                "{}: {} is not a file on this node. Fix: import it once (enroot import -o {} docker://IMAGE) on "
                "the shared file system, so that every node reads the same file".format(option, image, image)
            ]
        return []
    reference = image
    for scheme in SCHEMES:
        if reference.startswith(scheme):
            reference = reference[len(scheme) :]
    if "@" in reference:
        user, rest = reference.split("@", 1)
        if ":" in user and "/" not in user and "#" not in user and not DIGEST.fullmatch(rest):
            # Never echo it: the part before '@' looks like user:password.
            return [
                "{}: the image reference has credentials in it (USER:SECRET@...); they would be in the job's "
                "logs. Fix: put them in enroot's credentials file ($ENROOT_CONFIG_PATH/.credentials) and "
                "give USER@REGISTRY#IMAGE or no user at all".format(option)
            ]
        if "/" not in user and "#" not in user and not DIGEST.fullmatch(rest):
            reference = rest
    if "#" not in reference and "/" in reference:
        host = reference.split("/", 1)[0]
        if "." in host or ":" in host or host == "localhost":
            return [
                "{}: {!r} names the registry {} with '/'; enroot separates the registry with '#'. Fix: {}#{}".format(
                    option, image, host, image[: len(image) - len(reference)] + host, reference.split("/", 1)[1]
                )
            ]
    if not reference or re.search(r"\s", reference):
        return ["{}: {!r} is not an image reference; allowed: [USER@][REGISTRY#]IMAGE[:TAG]".format(option, image)]
    return []


def container_from(args: argparse.Namespace, root: Path) -> Optional[Container]:
    """The checked container options, or None without ``--container-image``. Raises with every problem."""
    problems: List[str] = []
    if not args.container_image:
        given = [
            option
            for option, value in (
                ("--container-mounts", args.container_mounts),
                ("--container-workdir", args.container_workdir),
                ("--container-name", args.container_name),
                ("--container-mount-home", args.container_mount_home),
            )
            if value
        ]
        if given:
            raise ContainerError(
                [
                    "{} given without --container-image. Fix: add --container-image IMAGE, or drop {}".format(
                        ", ".join(given), "them" if len(given) > 1 else "it"
                    )
                ]
            )
        return None
    problems += image_problems(args.container_image, root)
    mounts: Tuple[Mount, ...] = ()
    if args.container_mounts is not None:
        mounts, found = parse_mounts(args.container_mounts)
        problems += found
    if args.container_workdir is not None:
        found_workdir = _path_problem("--container-workdir", "path", args.container_workdir)
        problems += [found_workdir] if found_workdir else []
    if args.container_name is not None:
        name, _, flag = args.container_name.partition(":")
        if not NAME.fullmatch(name) or (flag and flag not in NAME_FLAGS):
            problems.append(
                "--container-name: {!r}; allowed: NAME[:FLAG], NAME of letters, digits, '_', '.', '-', FLAG one "
                "of {}".format(args.container_name, ", ".join(NAME_FLAGS))
            )
    if problems:
        raise ContainerError(problems)
    return Container(
        image=args.container_image,
        mounts=mounts,
        workdir=args.container_workdir,
        name=args.container_name,
        mount_home=args.container_mount_home,
    )


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def all_mounts(container: Container, shared_mount: Optional[str], runtime_dir: str) -> List[Mount]:
    """The shared file system and the runtime (read-only) unless a mount of the user's has that destination,
    then the user's; parents before children."""
    taken = {m.destination for m in container.mounts}
    defaults = []
    if shared_mount:
        shared = posixpath.normpath(shared_mount)
        defaults.append(Mount(shared, shared))
    if not any(_under(runtime_dir, m.source) and m.source == m.destination for m in (*defaults, *container.mounts)):
        defaults.append(Mount(runtime_dir, runtime_dir, ("ro",)))
    mounts = [m for m in defaults if m.destination not in taken] + list(container.mounts)
    return sorted(mounts, key=lambda m: m.destination.rstrip("/").count("/"))


def in_container(path: str, mounts: Sequence[Mount]) -> Optional[str]:
    """Where a host path is in the container, through the deepest mount that covers it; None if none does."""
    covering = [m for m in mounts if _under(path, m.source)]
    if not covering:
        return None
    mount = max(covering, key=lambda m: len(m.source))
    return posixpath.normpath(mount.destination + "/" + path[len(mount.source) :])


def _host_paths(script: Sequence[str]) -> List[str]:
    paths = []
    for argument in script:
        value = argument.split("=", 1)[1] if argument.startswith("-") and "=" in argument else argument
        if value.startswith("/"):
            paths.append(value)
    return paths


def plan(
    container: Container,
    environment: Dict[str, str],
    env: Mapping[str, str],
    facts: NodeFacts,
    family_variables: Mapping[str, str],
    path_like: Sequence[str],
    runtime_dir: str,
    place: Tuple[str, Sequence[str], Path],
) -> ContainerLaunch:
    """srun's pyxis options and the on-node stage's entry for this launch; ``place``: the batch script's working
    directory, the training script and its arguments, the node's root.

    ``environment`` (what the launcher sets on the host, changed in place): the family's path lists leave it,
    to be prepended in the container to the image's values; ``NVIDIA_VISIBLE_DEVICES=void`` joins it on nodes
    without GPUs. Every variable the launcher manages that the job's environment will hold is named in
    ``--container-env``, so the image's value does not win over it."""
    cwd, script, root = place
    shared_mount = facts.shared_mount
    gpus = bool(facts.gpus) and not facts.emulated_hardware
    for name in path_like:
        environment.pop(name, None)
    if not gpus and "NVIDIA_VISIBLE_DEVICES" not in env:
        environment["NVIDIA_VISIBLE_DEVICES"] = NO_GPU_DEVICES
    managed = set(environment) | {n for n in family_variables if n in env}
    managed |= {"NVIDIA_VISIBLE_DEVICES"} & set(env) if not gpus else set()
    container_env = sorted(n for n in managed if n not in path_like)
    path_lists = {n: v for n, v in family_variables.items() if n in path_like}
    mounts = all_mounts(container, shared_mount, runtime_dir)
    notes: List[str] = []
    if not shared_mount:
        notes.append("no shared file system in the node facts: only the runtime and --container-mounts are mounted")
    if container.image.startswith("/") and shared_mount and not _under(container.image, shared_mount):
        notes.append("{} is not on the shared file system: every node needs its own copy".format(container.image))
    workdir = container.workdir or in_container(cwd, mounts)
    if workdir is None and script and not script[0].startswith("/"):
        notes.append(
            "the working directory {} is not mounted in the container, so {} is looked up in the image's "
            "WORKDIR; give an absolute path, --container-workdir or --container-mounts".format(cwd, script[0])
        )
    destinations = [m.destination for m in mounts]
    for path in _host_paths(script):
        if not any(_under(path, d) for d in destinations) and (root / path.lstrip("/")).exists():
            notes.append(
                "{} is on this node but not mounted in the container (unless the image has it too). Fix: "
                "--container-mounts {}:{}".format(path, path, path)
            )
    options = ["--container-image={}".format(container.image)]
    options.append("--container-mounts={}".format(",".join(m.spec() for m in mounts)))
    if workdir:
        options.append("--container-workdir={}".format(workdir))
    if container.name:
        options.append("--container-name={}".format(container.name))
    options.append("--container-mount-home" if container.mount_home else "--no-container-mount-home")
    if container_env:
        options.append("--container-env={}".format(",".join(sorted(set(container_env)))))
    prepend = dict(path_lists)
    prepend["PYTHONPATH"] = runtime_dir
    on_node_options = ["--in-container"] + [
        "--prepend-env={}={}".format(name, value) for name, value in sorted(prepend.items())
    ]
    return ContainerLaunch(
        srun_options=options,
        entry=["python3", "-c", ENTRY.format(runtime_dir)],
        options=on_node_options,
        notes=tuple(notes),
    )


def node_environment(args: argparse.Namespace, env: Mapping[str, str], forbidden: Sequence[str]) -> Dict[str, str]:
    """The on-node stage's environment in the container: the family's path lists and the runtime before the
    image's own values, and the variables the launcher never passes on removed (an image may set them)."""
    result = dict(env)
    if not args.in_container:
        return result
    for name in forbidden:
        result.pop(name, None)
    for item in args.prepend_env:
        name, _, value = item.partition("=")
        current = [part for part in result.get(name, "").split(":") if part]
        first = value.split(":")
        result[name] = ":".join(first + [part for part in current if part not in first])
    return result
