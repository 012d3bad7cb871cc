"""Who runs slurmdbd on the controller, as the node reads it from its parameters file (``slurmdbd_owner``).

When the cluster gave HyperPod the external accounting database (``AccountingDatabase``), HyperPod configures
slurmdbd and the controller's accounting: the runtime's accounting steps step aside, so no second slurmdbd
configuration is written and nothing of HyperPod's is restarted. Elsewhere the runtime runs slurmdbd, as before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from runtime_fakes import RecordingRunner, fake_node, running_daemon, touch
from training_runtime.node import Node
from training_runtime.params import SLURMDBD_BY_HYPERPOD, ParametersError, ProvisioningParameters
from training_runtime.plan import apply_plan
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.daemon import RunningDaemon
from training_runtime.steps.slurm import slurmctld

SECRET = "arn:aws:secretsmanager:us-east-1:111122223333:secret:slurm-db-AbCdEf"
BUNDLE = b"a CA bundle\n"
EXTERNAL = {
    "accounting": {
        "enabled": True,
        "database": "external",
        "host": "acct.example.com",
        "password_secret_arn": SECRET,
        "ca_bundle_sha256": hashlib.sha256(BUNDLE).hexdigest(),  # TLS: tests/test_runtime_accounting_tls.py
    }
}
RUNTIME_ACCOUNTING_STEPS = {
    "accounting-database",
    "slurmdbd-config",
    "daemon:slurmdbd",
    "accounting-cluster",
    "slurm-accounting-include",
    "slurm-configless-push",
}
HYPERPOD_SLURMDBD_CONF = "# HyperPod's slurmdbd.conf\nStorageHost=acct.example.com\n"
HYPERPOD_ACCOUNTING_CONF = "# HyperPod's accounting.conf\nAccountingStorageType=accounting_storage/slurmdbd\n"


def controller(root: Path, *, by_hyperpod: bool, hyperpod_platform: bool = True) -> Node:
    """The controller of an api-driven cluster with an external database, on HyperPod (its marker, its slurm.conf,
    and the slurmdbd.conf and accounting.conf it wrote) unless ``hyperpod_platform`` is false."""
    runner = RecordingRunner({("aws", "secretsmanager"): (0, json.dumps({"password": "pw"}))})
    runner.hooks.append(lambda argv: argv[0] == "curl" and Path(argv[argv.index("--output") + 1]).write_bytes(BUNDLE))
    node = fake_node(root, instance="controller-1", mode="api-driven", options=EXTERNAL, fsx=False, runner=runner)
    if by_hyperpod:
        node = dataclasses.replace(node, params=dataclasses.replace(node.params, slurmdbd_owner=SLURMDBD_BY_HYPERPOD))
    if hyperpod_platform:
        (root / "opt/sagemaker_cluster").mkdir(parents=True)
        touch(root, "/opt/slurm/etc/slurm.conf", "SlurmctldHost=controller-1\nInclude accounting.conf\n")
        touch(root, "/opt/slurm/etc/slurmdbd.conf", HYPERPOD_SLURMDBD_CONF)
        # Without the flag, an AMI that configured no accounting of its own (one that did: test_runtime_ami.py).
        touch(root, "/opt/slurm/etc/accounting.conf", HYPERPOD_ACCOUNTING_CONF if by_hyperpod else "# Accounting\n")
    return node


def slurm_steps(node: Node) -> list:  # type: ignore[type-arg]
    """The controller's Slurm steps: from waiting for slurm.conf through slurmctld (the rest needs no fakes here)."""
    steps = steps_for(node)
    names = [s.name for s in steps]
    return steps[names.index("slurm-config") : names.index("daemon:slurmctld") + 1]


def test_hyperpod_runs_slurmdbd_so_the_runtime_plans_none_of_its_accounting_steps(tmp_path: Path) -> None:
    plan = steps_for(controller(tmp_path / "hp", by_hyperpod=True))
    assert RUNTIME_ACCOUNTING_STEPS & {s.name for s in plan} == set()
    [ctld] = [s for s in plan if isinstance(s, RunningDaemon) and s.name == "daemon:slurmctld"]
    assert ctld.config_files == ()  # HyperPod's accounting.conf changing is no reason for us to restart slurmctld
    ours = {s.name for s in steps_for(controller(tmp_path / "rt", by_hyperpod=False))}
    assert RUNTIME_ACCOUNTING_STEPS - ours == {"accounting-database"}  # external: every step but the local MariaDB


def test_the_plan_leaves_hyperpods_slurmdbd_configuration_alone_and_converges(tmp_path: Path) -> None:
    node = controller(tmp_path, by_hyperpod=True)
    running_daemon(node, slurmctld(node))
    steps = slurm_steps(node)
    assert apply_plan(node, steps) == 1  # slurmctld started; nothing written
    assert apply_plan(node, steps) == 0  # converged: a re-run (a patched node re-runs the script) changes nothing
    assert (tmp_path / "opt/slurm/etc/slurmdbd.conf").read_text() == HYPERPOD_SLURMDBD_CONF
    assert (tmp_path / "opt/slurm/etc/accounting.conf").read_text() == HYPERPOD_ACCOUNTING_CONF
    runner = node.runner
    assert isinstance(runner, RecordingRunner)
    assert runner.ran("aws", "secretsmanager") == [] and runner.ran("/opt/slurm/bin/sacctmgr") == []
    assert not any("slurmdbd" in " ".join(c) for c in runner.commands)


def test_where_the_runtime_runs_slurmdbd_it_writes_the_configuration_as_before(tmp_path: Path) -> None:
    """The contrast: without the flag the same plan overwrites slurmdbd.conf (the second writer the flag prevents)."""
    node = controller(tmp_path, by_hyperpod=False)
    step = next(s for s in steps_for(node) if s.name == "slurmdbd-config")
    step.apply(node)
    assert "StorageHost=acct.example.com" in (tmp_path / "opt/slurm/etc/slurmdbd.conf").read_text()
    assert (tmp_path / "opt/slurm/etc/slurmdbd.conf").read_text() != HYPERPOD_SLURMDBD_CONF


def test_on_the_generic_platform_nobody_else_runs_slurmdbd(tmp_path: Path) -> None:
    """The local cluster emulates such a config on plain machines: there is no HyperPod to run slurmdbd."""
    plan = {s.name for s in steps_for(controller(tmp_path, by_hyperpod=True, hyperpod_platform=False))}
    assert {"slurmdbd-config", "daemon:slurmdbd", "accounting-cluster"} <= plan


def test_the_flag_round_trips_and_older_files_mean_the_runtime(tmp_path: Path) -> None:
    node = controller(tmp_path, by_hyperpod=True, hyperpod_platform=False)
    written = node.params.to_json()
    assert written["hyperpod_cdk"]["slurmdbd_owner"] == "hyperpod"
    assert ProvisioningParameters.from_json(written).slurmdbd_by_hyperpod
    older = dataclasses.replace(node.params, slurmdbd_owner="runtime").to_json()
    assert "slurmdbd_owner" not in older["hyperpod_cdk"]  # files of other clusters stay byte for byte as they were
    assert not ProvisioningParameters.from_json(older).slurmdbd_by_hyperpod


@pytest.mark.parametrize(
    ("owner", "mode", "words"),
    [
        ("hyperpod", "lifecycle-driven", "only in api-driven mode"),
        ("slurm", "api-driven", "allowed: runtime, hyperpod"),
    ],
)
def test_a_wrong_owner_is_named(tmp_path: Path, owner: str, mode: str, words: str) -> None:
    data = controller(tmp_path, by_hyperpod=False, hyperpod_platform=False).params.to_json()
    data["hyperpod_cdk"].update(slurmdbd_owner=owner, mode=mode)
    with pytest.raises(ParametersError, match=words):
        ProvisioningParameters.from_json(data)
