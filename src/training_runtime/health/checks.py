"""The checks themselves: each compares the node with its facts and returns ok, skipped or failed."""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from training_runtime.facts import NodeFacts
from training_runtime.files import mount_points
from training_runtime.health.results import (
    DCGM,
    DISK,
    EFA,
    GPU,
    NEURON,
    PERIODIC,
    SHARED_STORAGE,
    CheckResult,
    failed,
    ok,
    skipped,
)
from training_runtime.node import HYPERPOD, SLURM_LAYOUTS, SlurmLayout, which_under
from training_runtime.options import HealthOptions
from training_runtime.paths import DCGM_BINARY, FI_INFO, NEURON_LS, RUNTIME_DIR_ON_SHARED, SLURMD_SPOOL_DIR
from training_runtime.probe import PROBE_TIMEOUT_S, probe_argv
from training_runtime.run import CommandError, Result, Runner

SLURMD_SPOOL = SLURMD_SPOOL_DIR
GIB = 1024**3
DISK_SHARE = 0.05
"""A file system passes with :attr:`HealthOptions.min_free_disk_gib` free, or 5 % of its size if smaller."""

CHECKS_DEADLINE_S = 30.0
"""All checks together; what is left of Slurm's 60 s goes to scontrol (3 calls at most)."""
TOOL_TIMEOUT_S = 15.0
DCGM_TIMEOUT_S = 25.0
SCONTROL_TIMEOUT_S = 8.0


@dataclass
class Context:
    """What the checks know: the node's facts and options, its root, and how to run commands.

    Tests give a fake root, a recording runner and a fake ``statvfs``; on a node they are ``/``, the real
    runner and :func:`os.statvfs`.
    """

    facts: NodeFacts
    options: HealthOptions = field(default_factory=HealthOptions)
    mode: str = PERIODIC
    root: Path = Path("/")
    runner: Runner = field(default_factory=Runner)
    node_name: str = ""
    statvfs: Callable[[str], Any] = os.statvfs
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        if not self.node_name:
            self.node_name = slurm_node_name(self.facts)

    @property
    def hyperpod(self) -> bool:
        return self.facts.platform == HYPERPOD

    @property
    def slurm(self) -> SlurmLayout:
        return SLURM_LAYOUTS[self.facts.platform]

    def path(self, absolute: str) -> Path:
        return self.root / absolute.lstrip("/")

    def run(self, argv: Sequence[str], timeout: float) -> Result:
        return self.runner.run(argv, timeout=timeout, check=False)

    def which(self, name: str, *extra_dirs: str) -> Optional[str]:
        """Absolute path (on the node) of an executable, searching ``extra_dirs`` and then PATH."""
        return which_under(self.root, name, extra_dirs)


def slurm_node_name(facts: NodeFacts) -> str:
    """``SLURMD_NODENAME`` (set for prologs and health check programs), else the name bootstrap recorded in the
    facts (:mod:`training_runtime.node_names`), else the instance name on the generic platform and the host name
    on HyperPod (facts written before the name was recorded)."""
    from_slurm = os.environ.get("SLURMD_NODENAME", "").strip()
    if from_slurm:
        return from_slurm
    if facts.slurm_name:
        return facts.slurm_name
    if facts.platform == HYPERPOD:
        return socket.gethostname().split(".")[0]
    return facts.instance_name


def _tail(result: Result, limit: int = 160) -> str:
    lines = [line.strip() for line in (result.stdout + "\n" + result.stderr).splitlines() if line.strip()]
    return (lines[-1] if lines else "no output")[-limit:]


def _ran(
    ctx: Context, argv: Sequence[str], timeout: float, label: Optional[str] = None
) -> Tuple[Optional[Result], str]:
    """(result, "") when the command ran to an exit status, (None, why) when it did not."""
    label = label or os.path.basename(argv[0])
    try:
        return ctx.run(argv, timeout), ""
    except CommandError as error:
        if error.returncode is None:
            return None, "{} did not answer within {:.0f} s".format(label, timeout)
        return None, "{} could not run: {}".format(label, error.output.strip()[-160:])


# --- the checks ------------------------------------------------------------------------------------


def _emulated(ctx: Context, name: str, count: int, words: str) -> Optional[CheckResult]:
    """Skipped, saying why, when this hardware is declared but not present (``hyperpod_cdk.emulation.hardware``)."""
    if not ctx.facts.emulated_hardware:
        return None
    return skipped(
        name,
        "emulated hardware: {} declares {} {}, not present here to check".format(ctx.facts.instance_type, count, words),
    )


def check_gpu(ctx: Context) -> CheckResult:
    """``nvidia-smi`` lists at least the GPUs the instance type has."""
    expected = ctx.facts.gpus
    if expected <= 0:
        return skipped(GPU, "no GPUs expected on {}".format(ctx.facts.instance_type))
    emulated = _emulated(ctx, GPU, expected, "GPUs")
    if emulated is not None:
        return emulated
    tool = ctx.which("nvidia-smi")
    if tool is None:
        return failed(GPU, "nvidia-smi not found; {} GPUs expected".format(expected))
    result, why = _ran(ctx, [tool, "--query-gpu=index", "--format=csv,noheader"], TOOL_TIMEOUT_S)
    if result is None:
        return failed(GPU, why)
    if not result.ok:
        return failed(GPU, "nvidia-smi exited {}: {}".format(result.returncode, _tail(result)))
    found = sum(1 for line in result.stdout.splitlines() if line.strip())
    if found < expected:
        return failed(GPU, "nvidia-smi lists {} of {} GPUs".format(found, expected))
    return ok(GPU, "{} GPUs".format(found))


DCGM_NO_ENGINE = re.compile(r"host ?engine|unable to (connect|establish a connection)", re.IGNORECASE)


def check_dcgm(ctx: Context) -> CheckResult:
    """``dcgmi diag -r 1`` passes (prolog and report only).

    Fails open: without ``dcgmi`` or a running host engine (``nvidia-dcgm``) the check is skipped, because
    that is missing software, not a GPU fault, and draining or replacing nodes for it would take a whole
    cluster out of service. The periodic check never runs it: the GPUs may be busy with a job then.
    """
    if ctx.facts.gpus <= 0:
        return skipped(DCGM, "no GPUs expected on {}".format(ctx.facts.instance_type))
    emulated = _emulated(ctx, DCGM, ctx.facts.gpus, "GPUs")
    if emulated is not None:
        return emulated
    if ctx.options.dcgm_level == 0:
        return skipped(DCGM, "turned off (health.dcgm_level: 0)")
    if ctx.mode == PERIODIC:
        return skipped(DCGM, "runs in the prolog only; the GPUs may be in use now")
    tool = ctx.which(DCGM_BINARY)
    if tool is None:
        return skipped(DCGM, "dcgmi not installed (fails open)")
    argv = [tool, "diag", "-r", str(ctx.options.dcgm_level)]
    result, why = _ran(ctx, argv, DCGM_TIMEOUT_S)
    if result is None:
        return failed(DCGM, why)
    if result.ok:
        return ok(DCGM, "dcgmi diag -r {} passed".format(ctx.options.dcgm_level))
    output = result.stdout + result.stderr
    if DCGM_NO_ENGINE.search(output) and "Fail" not in output:
        return skipped(DCGM, "DCGM host engine not answering (fails open): {}".format(_tail(result)))
    failing = [line.strip(" |") for line in output.splitlines() if "Fail" in line]
    return failed(DCGM, "dcgmi diag -r {}: {}".format(ctx.options.dcgm_level, (failing or [_tail(result)])[0][:160]))


def neuron_device_count(data: Any) -> Optional[int]:
    """Devices in ``neuron-ls`` JSON: entries with a ``neuron_device`` key (a list of them up to Neuron
    2.33), or a ``neuron_devices`` list; None when neither shape is found."""
    found = 0
    stack = [data]
    listed: Optional[int] = None
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "neuron_device" in item:
                found += 1
            if listed is None and isinstance(item.get("neuron_devices"), list):
                listed = len(item["neuron_devices"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    if found:
        return found
    return listed


def check_neuron(ctx: Context) -> CheckResult:
    """``neuron-ls`` runs and lists at least the Neuron devices the instance type has."""
    expected = ctx.facts.neuron_devices
    if expected <= 0:
        return skipped(NEURON, "no Neuron devices expected on {}".format(ctx.facts.instance_type))
    emulated = _emulated(ctx, NEURON, expected, "Neuron devices")
    if emulated is not None:
        return emulated
    tool = ctx.which("neuron-ls", os.path.dirname(NEURON_LS))
    if tool is None:
        return failed(NEURON, "neuron-ls not found; {} Neuron devices expected".format(expected))
    result, why = _ran(ctx, [tool, "--json-output"], TOOL_TIMEOUT_S)
    if result is not None and not result.ok:
        # Neuron 2.34 replaced --json-output with --output-format json.
        result, why = _ran(ctx, [tool, "--output-format", "json"], TOOL_TIMEOUT_S)
    if result is None:
        return failed(NEURON, why)
    if not result.ok:
        return failed(NEURON, "neuron-ls exited {}: {}".format(result.returncode, _tail(result)))
    try:
        found = neuron_device_count(json.loads(result.stdout))
    except ValueError:
        found = None
    source = "neuron-ls"
    if found is None:
        found, source = _device_nodes(ctx, re.compile(r"^neuron\d+$")), "/dev/neuron*"
    if found < expected:
        return failed(NEURON, "{} shows {} of {} Neuron devices".format(source, found, expected))
    return ok(NEURON, "{} Neuron devices".format(found))


def _device_nodes(ctx: Context, pattern: "re.Pattern[str]") -> int:
    try:
        return sum(1 for entry in ctx.path("/dev").iterdir() if pattern.fullmatch(entry.name))
    except OSError:
        return 0


def efa_domains(fi_info_output: str) -> List[str]:
    """The distinct domains (one per EFA device) of the ``efa`` provider in ``fi_info`` output."""
    domains: List[str] = []
    provider = ""
    for line in fi_info_output.splitlines():
        key, _, value = line.strip().partition(":")
        value = value.strip()
        if key == "provider":
            provider = value
        elif key == "domain" and provider == "efa" and value not in domains:
            domains.append(value)
    return domains


def check_efa(ctx: Context) -> CheckResult:
    """``fi_info -p efa -t FI_EP_RDM`` lists at least the EFA devices the instance type has."""
    expected = ctx.facts.efa_interfaces
    if expected <= 0:
        return skipped(EFA, "no EFA interfaces expected on {}".format(ctx.facts.instance_type))
    emulated = _emulated(ctx, EFA, expected, "EFA interfaces")
    if emulated is not None:
        return emulated
    tool = ctx.which("fi_info", os.path.dirname(FI_INFO))
    if tool is None:
        return failed(EFA, "fi_info not found; {} EFA interfaces expected".format(expected))
    result, why = _ran(ctx, [tool, "-p", "efa", "-t", "FI_EP_RDM"], TOOL_TIMEOUT_S)
    if result is None:
        return failed(EFA, why)
    if not result.ok:
        return failed(EFA, "fi_info -p efa exited {}: {}".format(result.returncode, _tail(result)))
    found = len(efa_domains(result.stdout))
    if found < expected:
        return failed(EFA, "fi_info lists {} of {} EFA devices".format(found, expected))
    return ok(EFA, "{} EFA devices".format(found))


def _in_fstab(ctx: Context, mount: str) -> bool:
    try:
        text = ctx.path("/etc/fstab").read_text()
    except OSError:
        return False
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 1 and not fields[0].startswith("#") and fields[1].rstrip("/") == mount:
            return True
    return False


def check_shared_storage(ctx: Context) -> CheckResult:
    """The shared file system is mounted and takes a write (create, fsync, remove) within 10 s.

    It must be a mount point on HyperPod (the facts name a mount only when FSx is configured) and on the
    generic platform when ``/etc/fstab`` lists it; a cluster without a file system only needs the
    directory to be writable, as at bootstrap.
    """
    mount = (ctx.facts.shared_mount or "").rstrip("/")
    if not mount:
        return skipped(SHARED_STORAGE, "no shared file system configured")
    must_be_mounted = ctx.hyperpod or _in_fstab(ctx, mount)
    if must_be_mounted and mount not in mount_points(ctx.root):
        return failed(SHARED_STORAGE, "{} is not mounted".format(mount))
    if not ctx.path(mount).is_dir():
        return failed(SHARED_STORAGE, "{} does not exist".format(mount))
    directory = str(ctx.path("{}/{}/health".format(mount, RUNTIME_DIR_ON_SHARED)))
    name = "{}.{}".format(ctx.node_name or "node", os.getpid())
    probe = probe_argv(directory, name)
    result, why = _ran(ctx, probe, PROBE_TIMEOUT_S, label="a write to " + mount)
    if result is None:
        return failed(SHARED_STORAGE, why)
    if not result.ok:
        return failed(SHARED_STORAGE, "cannot write to {}: {}".format(mount, _tail(result)))
    return ok(SHARED_STORAGE, "{} mounted and writable".format(mount) if must_be_mounted else mount + " writable")


def check_disk(ctx: Context) -> CheckResult:
    """``/``, ``/tmp`` and Slurm's spool directory each have ``min_free_disk_gib`` free, or 5 % of their
    file system when that is less (a small test disk is not always "full")."""
    floor_gib = ctx.options.min_free_disk_gib
    if floor_gib <= 0:
        return skipped(DISK, "turned off (health.min_free_disk_gib: 0)")
    seen: List[Any] = []
    notes: List[str] = []
    for path in ("/", "/tmp", SLURMD_SPOOL):
        if not ctx.path(path).is_dir():
            continue
        try:
            info = ctx.statvfs(str(ctx.path(path)))
        except OSError as error:
            return failed(DISK, "cannot stat {}: {}".format(path, error))
        fsid = getattr(info, "f_fsid", None)
        if fsid is not None and fsid != 0 and fsid in seen:
            continue
        seen.append(fsid)
        total = info.f_blocks * info.f_frsize
        free = info.f_bavail * info.f_frsize
        need = min(floor_gib * GIB, DISK_SHARE * total)
        if free < need:
            return failed(
                DISK,
                "{} has {:.1f} GiB free of {:.1f} GiB, needs {:.1f}".format(path, free / GIB, total / GIB, need / GIB),
            )
        notes.append("{} {:.0f} GiB free".format(path, free / GIB))
    return ok(DISK, ", ".join(notes))


CHECKS: Tuple[Tuple[str, Callable[[Context], CheckResult]], ...] = (
    (GPU, check_gpu),
    (DCGM, check_dcgm),
    (NEURON, check_neuron),
    (EFA, check_efa),
    (SHARED_STORAGE, check_shared_storage),
    (DISK, check_disk),
)


def run_checks(ctx: Context, deadline_s: float = CHECKS_DEADLINE_S) -> List[CheckResult]:
    """Every check, in parallel threads; one still running after ``deadline_s`` counts as failed.

    The threads are daemons: a check stuck in the kernel (a hung GPU or file system) is abandoned, and the
    program still exits.
    """
    results: Dict[str, CheckResult] = {}

    def run(name: str, check: Callable[[Context], CheckResult]) -> None:
        try:
            results[name] = check(ctx)
        except Exception as error:  # a bug in one check must not hide the others
            results[name] = failed(name, "check crashed: {}: {}".format(type(error).__name__, error))

    threads = [threading.Thread(target=run, args=check, name="health-" + check[0], daemon=True) for check in CHECKS]
    end = time.monotonic() + deadline_s
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    return [results.get(name) or failed(name, "no result within {:.0f} s".format(deadline_s)) for name, _ in CHECKS]
