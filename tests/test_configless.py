"""Accounting where researchers work (issue #26): one set of accounting keys on both platforms, and HyperPod's
configless compute and login nodes (``slurmd --conf-server``) that read the controller's slurm.conf and its
``accounting.conf``, in the runtime and in the emulator that plays HyperPod. The local-cluster tests
(tests/test_local_hyperpod.py, tests/test_local_cluster.py) run ``sacct`` on the login node for real."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperpod_cdk.core.config import parse_config
from hyperpod_local import hyperpod_platform as emulated
from hyperpod_local.layout import plan_layout
from runtime_fakes import RecordingRunner, fake_node, touch
from training_runtime.groups import COMPUTE, CONTROLLER, LOGIN
from training_runtime.hardware import hardware_for
from training_runtime.node import Node
from training_runtime.node_names import IP_NAMES
from training_runtime.params import API_DRIVEN, LIFECYCLE_DRIVEN
from training_runtime.plan import StepError, apply_plan
from training_runtime.render.slurm_conf import Partition, SlurmNode, SlurmSettings, render_slurm_conf
from training_runtime.retry import RetryPolicy
from training_runtime.steps import configless
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.configless import SLURMD_DROP_IN, ConfiglessPush, SlurmdConfServer
from training_runtime.steps.slurm import accounting_lines, slurmd

ACCOUNTING = {"accounting": {"enabled": True}}
INCLUDE = "/opt/slurm/etc/accounting.conf"


def keys(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return {key: value for key, value in pairs}


def hyperpod_node(root: Path, instance: str = "controller-1", **kwargs: object) -> Node:
    node = fake_node(root, instance=instance, mode=API_DRIVEN, **kwargs)  # type: ignore[arg-type]
    (root / "opt/sagemaker_cluster").mkdir(parents=True, exist_ok=True)
    return node


# --- one definition of the accounting keys -------------------------------------------------------------


def test_hyperpods_accounting_include_sets_the_generic_keys_and_records_gpu_use(tmp_path: Path) -> None:
    include = keys(accounting_lines(hyperpod_node(tmp_path, options=ACCOUNTING)))
    assert include == {
        "AccountingStorageType": "accounting_storage/slurmdbd",
        "AccountingStorageHost": "controller-1",
        "AccountingStoragePort": "6819",
        "AccountingStorageTRES": "gres/gpu",
        "JobAcctGatherType": "jobacct_gather/linux",
        "JobAcctGatherFrequency": "30",
    }
    p5 = hardware_for("ml.p5.48xlarge", {})
    settings = SlurmSettings(
        cluster_name="c", controller_name="ctl", controller_address="10.0.0.1", accounting_host="ctl"
    )
    generic = keys(render_slurm_conf(settings, [SlurmNode("w1", "10.0.0.2", p5)], [Partition("dev", ("w1",))]))
    assert {k: generic[k] for k in include} == {**include, "AccountingStorageHost": "ctl"}


# --- configless slurmd -------------------------------------------------------------------------------------


def test_hyperpods_slurmd_fetches_its_configuration_from_every_controller(tmp_path: Path) -> None:
    for instance in ("login-1", "workers-1"):
        argv = slurmd(hyperpod_node(tmp_path / instance, instance)).argv
        assert argv[1:] == ("--conf-server", "10.1.0.10")
    two = {**{"controller": [("controller-1", "10.1.0.10"), ("controller-2", "10.1.0.9")]}}
    instances = {"login": [("login-1", "10.1.0.5")], "workers": [("workers-1", "10.1.0.11")], **two}
    argv = slurmd(hyperpod_node(tmp_path / "multi", "workers-1", instances=instances)).argv
    assert argv[1:] == ("--conf-server", "10.1.0.10,10.1.0.9")
    generic = slurmd(fake_node(tmp_path / "generic", instance="workers-1")).argv
    assert generic[1:] == ("-N", "workers-1")


def test_the_hyperpod_controller_sends_its_accounting_include_to_configless_nodes(tmp_path: Path) -> None:
    plan = [s.name for s in steps_for(hyperpod_node(tmp_path / "hp", options=ACCOUNTING))]
    assert plan.index("slurm-accounting-include") < plan.index("daemon:slurmctld") < plan.index("slurm-configless-push")
    [push] = [s for s in steps_for(hyperpod_node(tmp_path / "hp2", options=ACCOUNTING)) if type(s) is ConfiglessPush]
    assert push.files == (INCLUDE,)
    generic = [s.name for s in steps_for(fake_node(tmp_path / "g", instance="controller-1", options=ACCOUNTING))]
    assert "slurm-configless-push" not in generic  # every generic node renders slurm.conf itself
    assert "slurm-configless-push" not in [s.name for s in steps_for(hyperpod_node(tmp_path / "off"))]


@pytest.fixture
def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(configless, "RECONFIGURE_WAIT", RetryPolicy(attempts=3, base_s=0.0, cap_s=0.0, deadline_s=5.0))


def test_reconfigure_runs_once_per_change_and_waits_for_slurmctld(tmp_path: Path, no_wait: None) -> None:
    runner = RecordingRunner({("/opt/slurm/bin/scontrol", "reconfigure"): (1, "")})
    node = hyperpod_node(tmp_path, options=ACCOUNTING, runner=runner)
    pushes: list[list[str]] = []

    def slurmctld_answers_on_the_second_try(argv: list[str]) -> None:
        pushes.append(argv)
        if len(pushes) == 2:
            runner.respond[("/opt/slurm/bin/scontrol", "reconfigure")] = (0, "")

    runner.hooks.append(slurmctld_answers_on_the_second_try)
    touch(tmp_path, INCLUDE, "AccountingStorageType=accounting_storage/slurmdbd\n")
    step = ConfiglessPush([INCLUDE])
    assert apply_plan(node, [step]) == 1
    assert runner.ran("/opt/slurm/bin/scontrol", "reconfigure") == [["/opt/slurm/bin/scontrol", "reconfigure"]] * 2
    assert apply_plan(node, [step]) == 0  # nothing changed: no push
    touch(tmp_path, INCLUDE, "AccountingStorageType=accounting_storage/slurmdbd\nJobAcctGatherFrequency=10\n")
    assert apply_plan(node, [step]) == 1
    assert len(runner.ran("/opt/slurm/bin/scontrol", "reconfigure")) == 3


def test_a_push_slurmctld_never_takes_fails_the_step_with_the_fix(tmp_path: Path, no_wait: None) -> None:
    runner = RecordingRunner({("/opt/slurm/bin/scontrol", "reconfigure"): (1, "")})
    node = hyperpod_node(tmp_path, options=ACCOUNTING, runner=runner)
    touch(tmp_path, INCLUDE, "x\n")
    with pytest.raises(StepError, match="run `scontrol reconfigure` on the controller"):
        apply_plan(node, [ConfiglessPush([INCLUDE])])
    assert ConfiglessPush([INCLUDE]).needed(node)  # not recorded as pushed: the next run tries again


# --- the emulator plays it ------------------------------------------------------------------------------------


def layout():  # type: ignore[no-untyped-def]
    groups = [
        {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
        {"name": "login", "role": "login", "instance_type": "ml.m5.large", "count": 1},
        {"name": "cpu", "role": "compute", "instance_type": "ml.c5.4xlarge", "count": 2},
    ]
    return plan_layout(parse_config({"cluster_name": "lab", "storage": None, "instance_groups": groups}))


def test_the_emulated_controller_serves_its_configuration_and_its_include() -> None:
    lines = emulated.slurm_conf(layout(), IP_NAMES, cpus=2).splitlines()
    assert "SlurmctldParameters=enable_configless" in lines
    # slurmctld sends configless nodes only includes named without a path, next to slurm.conf (slurm.conf(5)).
    assert [line for line in lines if line.lower().startswith("include")] == ["include accounting.conf"]


@pytest.mark.parametrize("role", [LOGIN, COMPUTE])
def test_emulated_login_and_compute_nodes_run_configless(role: str) -> None:
    script = emulated.agent_script(role, API_DRIVEN, "10.250.0.10")
    assert "$s/slurm.conf" not in script and "rm -f /opt/slurm/etc/slurm.conf" in script
    assert "/opt/slurm/sbin/slurmd --conf-server 10.250.0.10" in script
    assert "--conf-server" not in emulated.agent_script(role, LIFECYCLE_DRIVEN, "10.250.0.10")  # the runtime starts it
    controller = emulated.agent_script(CONTROLLER, API_DRIVEN, "10.250.0.10")
    assert "install -m 0644 $s/slurm.conf /opt/slurm/etc/slurm.conf" in controller and "--conf-server" not in controller
    assert emulated.conf_server(layout()) == "10.250.0.10"


def test_with_systemd_the_runtime_gives_hyperpods_slurmd_unit_its_conf_server(tmp_path: Path) -> None:
    runner = RecordingRunner()
    node = fake_node(tmp_path, instance="login-1", mode=LIFECYCLE_DRIVEN, runner=runner)
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    (tmp_path / "run/systemd/system").mkdir(parents=True)
    plan = steps_for(node)
    names = [s.name for s in plan]
    assert names.index("slurmd-conf-server") < names.index("daemon:slurmd")
    [daemon] = [s for s in plan if s.name == "daemon:slurmd"]
    assert daemon.config_files == (SLURMD_DROP_IN,)  # a changed drop-in restarts slurmd
    step = next(s for s in plan if isinstance(s, SlurmdConfServer))
    assert apply_plan(node, [step]) == 1
    assert 'Environment="SLURMD_OPTIONS=--conf-server 10.1.0.10"' in (tmp_path / SLURMD_DROP_IN[1:]).read_text()
    assert runner.ran("systemctl", "daemon-reload") == [["systemctl", "daemon-reload"]]
    assert apply_plan(node, [step]) == 0
    api = fake_node(tmp_path / "api", instance="login-1", mode=API_DRIVEN)
    (tmp_path / "api/opt/sagemaker_cluster").mkdir(parents=True)
    (tmp_path / "api/run/systemd/system").mkdir(parents=True)
    assert "slurmd-conf-server" not in [s.name for s in steps_for(api)]  # HyperPod started its slurmd already
