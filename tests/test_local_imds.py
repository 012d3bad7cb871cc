"""The instance metadata service answers root only, on a local cluster (HyperPod platform, root only): the
runtime's ``imds-guard`` step for real on every node, with the emulated control plane serving real role keys.

Config: examples/cpu-cluster.yaml with a second user, ``pipeline``, and ``runtime.security.imds_groups: [pipeline]``.
As ``researcher`` on a login, a compute and the controller node, from a shell, an ``srun`` step and an ``sbatch`` job,
the credentials request is refused; root gets the keys, and so does ``pipeline`` (its primary group), and
``researcher`` once added to that group (supplementary). A reboot of the login node, which does not re-run the
lifecycle script, keeps the rule; a second bootstrap leaves it alone. The tries are
:func:`hostile_imds.credentials_as`, which the hostile-user drill reuses.
Alone: ``python -m pytest tests/test_local_imds.py`` (about 20 s after the node root file system is built).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from hostile_imds import credentials_as
from hyperpod_local import LocalCluster
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.plan import UpOptions
from local_support import CPU_CLUSTER, requires_hyperpod_platform, variant
from training_runtime.imds_guard import CHAIN
from training_runtime.node import HYPERPOD

pytestmark = [requires_hyperpod_platform, pytest.mark.hostile]  # the hostile-user drill (tests/hostile_drill.py)

CONTROLLER, LOGIN = "controller-machine-1", "login-group-1"
WORKER, OTHER_WORKER = "worker-group-1-1", "worker-group-1-2"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk0ZXhhbXBsZWtleWZvcmRvY3Nvbmx5 pipeline@laptop"


def guarded_config(directory: Path) -> Path:
    """cpu-cluster.yaml with the user ``pipeline`` and its group allowed through."""
    data = yaml.safe_load(CPU_CLUSTER.read_text())
    data["users"].append({"name": "pipeline", "uid": 2002, "ssh_public_keys": [KEY]})
    data["runtime"]["security"] = {"imds_groups": ["pipeline"]}
    path = directory / "imds-cluster.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    workdir = tmp_path_factory.mktemp("imds")
    cluster = LocalCluster.up(
        guarded_config(workdir),
        workdir,
        variant(platform=HYPERPOD),
        UpOptions(prefix=f"hpim{os.getpid() % 10000}", subnet="10.226.0.0/24"),
    )
    try:
        control_plane.start(cluster)  # the metadata service with the role's keys
        yield cluster
    finally:
        cluster.down()


def test_an_ordinary_user_is_refused_on_every_kind_of_node_and_root_gets_the_keys(cluster: LocalCluster) -> None:
    for node in (LOGIN, WORKER, CONTROLLER):
        root = credentials_as(cluster, node, "root")
        assert root.got_credentials, f"root on {node}: {root.output}"
        user = credentials_as(cluster, node, "researcher")
        assert user.outcome == "refused", f"researcher on {node}: {user.output}"


def test_a_job_cannot_read_the_credentials_but_one_of_an_allowed_group_can(cluster: LocalCluster) -> None:
    step = credentials_as(cluster, WORKER, "researcher", via="srun", submit_from=LOGIN)
    assert step.outcome == "refused", step.output
    batch = credentials_as(cluster, OTHER_WORKER, "researcher", via="sbatch", submit_from=LOGIN)
    assert batch.outcome == "refused", batch.output
    allowed = credentials_as(cluster, WORKER, "pipeline", via="srun", submit_from=LOGIN)
    assert allowed.got_credentials, allowed.output


def test_the_allowed_group_counts_as_a_supplementary_group_too(cluster: LocalCluster) -> None:
    assert credentials_as(cluster, LOGIN, "pipeline").got_credentials
    added = cluster.exec(LOGIN, ["usermod", "-aG", "pipeline", "researcher"])
    assert added.returncode == 0, added.stderr
    try:
        member = credentials_as(cluster, LOGIN, "researcher")
        assert member.got_credentials, member.output
    finally:
        cluster.exec(LOGIN, ["gpasswd", "-d", "researcher", "pipeline"])
    assert credentials_as(cluster, LOGIN, "researcher").outcome == "refused"


def test_a_reboot_keeps_the_rule_and_a_second_bootstrap_leaves_it_alone(cluster: LocalCluster) -> None:
    # HyperPod's reboot: the lifecycle script does not run, and the node's network namespace is a new one. The login
    # node, because the emulated agent replaces a compute node that goes down under it.
    cluster.reboot(LOGIN)
    uptime = float(cluster.exec(LOGIN, ["cut", "-d", " ", "-f1", "/proc/uptime"]).stdout)
    assert uptime < 60, f"the login node was not rebooted (uptime {uptime} s)"
    rules = cluster.exec(LOGIN, ["iptables", "-w", "-S", CHAIN])
    assert rules.returncode == 0 and "-j REJECT" in rules.stdout, rules.stdout + rules.stderr
    assert credentials_as(cluster, LOGIN, "researcher").outcome == "refused"
    assert credentials_as(cluster, LOGIN, "root").got_credentials
    before = cluster.exec(WORKER, ["iptables-save"]).stdout
    code, output = cluster.bootstrap(WORKER)
    assert code == 0, output[-2000:]
    events = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    guard = [e for e in events if e.get("event") == "step" and e.get("step") == "imds-guard"]
    assert [e["result"] for e in guard] == ["unchanged"], guard
    assert without_counters(cluster.exec(WORKER, ["iptables-save"]).stdout) == without_counters(before)


def without_counters(saved: str) -> list[str]:
    """iptables-save's rules without its comments (a date) and chain counters."""
    return [line.split(" [")[0] for line in saved.splitlines() if not line.startswith("#")]
