"""Shared by the tests that run a local cluster: when they can run here, and why not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk.ops.context import Captured
from hyperpod_local import LocalCluster, LocalClusterError
from hyperpod_local.plan import UpOptions
from hyperpod_local.rootfs import node_rootfs
from hyperpod_local.variant import DEFAULT_PLATFORM, DEFAULT_SLURM, Variant
from training_runtime.node import GENERIC, HYPERPOD
from training_runtime.node_names import address_of

CPU_CLUSTER = Path(__file__).resolve().parent.parent / "examples" / "cpu-cluster.yaml"
"""The config the local-cluster tests bring up: controller (accounting), login node, two workers, a user."""

NEEDED_COMMANDS = ("slurmctld", "slurmd", "munged", "mariadbd", "unshare", "nsenter", "ip")


def skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the local cluster needs root (namespaces, mounts, veth)"
    missing = [c for c in NEEDED_COMMANDS if shutil.which(c, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]
    if missing:
        return f"missing {', '.join(missing)}; run ./scripts/install-system-packages.sh (make setup does)"
    try:
        probe = subprocess.run(["unshare", "--net", "--time", "true"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"cannot run unshare: {error}"
    if probe.returncode != 0:
        return f"`unshare --net --time true` failed: {probe.stderr.decode().strip()}"
    return None


NODE_NAMES_ENV = "HYPERPOD_LOCAL_TEST_NODE_NAMES"
"""Set to ``instance`` (or ``ip``) to bring every HyperPod-platform local cluster of the run up in that naming,
where its test does not choose one itself: ``HYPERPOD_LOCAL_TEST_NODE_NAMES=instance pytest tests/test_local_*.py``
(docs/testing.md). Unset, each test runs in the naming it names or the platform's default."""


def variant(**choices: Any) -> Variant:
    """The :class:`Variant` a test asks for, in the naming :data:`NODE_NAMES_ENV` names when the test does not
    choose one on the HyperPod platform: the tests' one seam for the naming, injected into the value."""
    naming = os.environ.get(NODE_NAMES_ENV)
    if naming and choices.get("platform", DEFAULT_PLATFORM) == HYPERPOD and choices.get("node_names") is None:
        choices["node_names"] = naming
    return Variant(**choices)


REASON = skip_reason()


def rootfs_reason(slurm: str = DEFAULT_SLURM) -> str | None:
    """Why the node root file system with Slurm ``slurm`` (the HyperPod platform's by default) is not here, or None."""
    try:
        node_rootfs(slurm)
    except LocalClusterError as error:
        return str(error)
    return None


HYPERPOD_REASON = REASON or rootfs_reason()


def local_reason(rootfs: str | None = None, root_only: bool = False) -> str | None:
    """Why a test marked ``local(...)`` cannot run on this machine, or None: ``root_only`` needs root and nothing
    else (network namespaces); otherwise a local cluster's commands, and with ``rootfs`` that Slurm major's node
    root file system. tests/conftest.py skips a marked test with this reason."""
    if root_only:
        return None if os.geteuid() == 0 else "needs root (network namespaces)"
    return REASON or (rootfs_reason(rootfs) if rootfs else None)


# The tier marker of the tests that bring up a local cluster: `pytest -m "not local"` (make test-fast) leaves them
# out, and tests/conftest.py skips them, with the reason, where this machine cannot run them.
requires_local_cluster = pytest.mark.local
"""A local cluster on the generic platform (the host's own root)."""
requires_hyperpod_platform = pytest.mark.local(rootfs=DEFAULT_SLURM)
"""A local cluster on the emulated HyperPod platform (its node root file system)."""


@contextmanager
def cpu_cluster(
    workdir: Path, prefix: str, subnet: str, platform: str = GENERIC, slurm: str | None = None
) -> Iterator[LocalCluster]:
    """:data:`CPU_CLUSTER` up in ``workdir`` (the prefix gets this process's id), taken down afterwards."""
    cluster = LocalCluster.up(
        CPU_CLUSTER,
        workdir,
        variant(platform=platform, slurm=slurm),
        UpOptions(prefix=f"{prefix}{os.getpid() % 10000}", subnet=subnet),
    )
    try:
        yield cluster
    finally:
        cluster.down()


@dataclass(frozen=True)
class Release:
    """A job that runs until the test lets it end, instead of sleeping for a length that has to outlast what the test
    looks at: :attr:`wait` is the job's shell loop, waiting for a file on the cluster's shared directory, and
    :meth:`now` creates the file."""

    host: Path
    on_node: str

    @property
    def wait(self) -> str:
        return f"while [ ! -e {self.on_node} ]; do sleep 0.5; done"

    def now(self) -> None:
        self.host.touch()


@contextmanager
def release(cluster: LocalCluster, name: str) -> Iterator[Release]:
    """A :class:`Release` by the file ``name`` at the top of the shared directory, created on the way out in any case:
    a test that fails before it lets its job end leaves no job running into the module's next test."""
    found = Release(cluster.workdir / "shared" / name, f"{cluster.state.fsx_mount_path}/{name}")
    try:
        yield found
    finally:
        found.now()


SELF_QUERY = (
    'for i in $(seq 60); do r=$(sacct -n -X -P -j "$SLURM_JOB_ID" -o jobid,state); '
    'case "$r" in *RUNNING*) break;; esac; sleep 1; done; echo "$SLURM_JOB_ID $r"'
)
"""A job step's script that prints its job id and its own job's sacct record (id|state), waiting up to a
minute for slurmdbd to record it running."""


def check_accounting_where_users_are(cluster: LocalCluster, login: str, user: str) -> None:
    """Accounting works where researchers work (issue #26): ``sacct`` on the login node lists ``user``'s
    finished job, ``sreport`` and ``sshare`` answer there, and a job on a compute node finds its own record."""

    def as_user(*argv: str) -> subprocess.CompletedProcess[str]:
        return cluster.exec(login, ["runuser", "-u", user, "--", *argv], timeout=120)

    ran = as_user("srun", "-N2", "-J", "login-probe", "true")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = ""
    for _ in range(60):
        listed = as_user("sacct", "-n", "-X", "-P", "-o", "jobname,user,state")
        out = listed.stdout + listed.stderr
        if f"login-probe|{user}|COMPLETED" in out.split():
            break
        cluster.exec(login, ["sleep", "1"])
    else:
        raise AssertionError(f"sacct on the login node never listed the job:\n{out}")
    for argv in (("sreport", "-n", "-P", "cluster", "utilization"), ("sshare", "-n", "-P")):
        answer = as_user(*argv)
        assert answer.returncode == 0 and "disabled" not in answer.stdout + answer.stderr, (
            f"{' '.join(argv)} on the login node:\n{answer.stdout}{answer.stderr}"
        )
    own = as_user("srun", "-N1", "sh", "-c", SELF_QUERY)
    words = own.stdout.split()
    assert len(words) == 2 and words[1] == f"{words[0]}|RUNNING", f"a job's own record:\n{own.stdout}{own.stderr}"


@dataclass
class SsmOnTheNode:
    """The fake for ``aws ssm start-session --document-name AWS-StartNonInteractiveCommand`` (an operator command's
    ``ssm_command``, tests/ops_support.py): a local node has no SSM agent, so the command runs on the node the target
    names (``sagemaker-cluster:<id>_<group>-<instance>``, resolved through ListClusterNodes of cluster ``name`` to its
    address) inside that node's namespaces (``cluster.exec``). ``sagemaker`` is a client of the emulated control
    plane (``hyperpod_local.control_plane.local.client_env``)."""

    cluster: LocalCluster
    sagemaker: Any
    name: str
    """The cluster's name in the API (its config's ``cluster_name``)."""

    def __call__(self, argv: list[str]) -> Captured:
        assert argv[argv.index("--document-name") + 1] == "AWS-StartNonInteractiveCommand"
        command = json.loads(argv[argv.index("--parameters") + 1])["command"]
        arn = self.sagemaker.describe_cluster(ClusterName=self.name)["ClusterArn"]
        prefix = f"sagemaker-cluster:{arn.rsplit('/', 1)[-1]}_"
        target = argv[argv.index("--target") + 1]
        assert target.startswith(prefix), target
        pages = self.sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=self.name)
        listed = next(
            n
            for page in pages
            for n in page["ClusterNodeSummaries"]
            if f"{n['InstanceGroupName']}-{n['InstanceId']}" == target[len(prefix) :]
        )
        address = address_of(listed["PrivateDnsHostname"])
        name = next(n.name for n in LocalCluster.open(self.cluster.workdir).nodes if n.ip == address)
        done = self.cluster.exec(name, ["sh", "-c", " ".join(command)], timeout=60)
        return Captured(done.returncode, done.stdout, done.stderr)


def use_control_plane(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Point boto3 (and the operator CLI) at the cluster's emulated control plane with the instance role's keys,
    away from the caller's AWS profile and files; returns the variables set."""
    from hyperpod_local.control_plane import local as control_plane

    found = control_plane.client_env(cluster)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in found.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    return found
