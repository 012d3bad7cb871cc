"""The rules that decide from EC2's hardware facts (rules/hardware.py, FSX-EFA-CLIENTS): each refuses or warns on the
type whose facts break it and passes the one whose facts keep it, whatever the type's name suggests."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hyperpod_cdk.core.config import ClusterConfig
from training_runtime.problems import Problem

HARDWARE_RULES = {
    "GRP-THREADS-PER-CORE",
    "GRP-HARDWARE-UNKNOWN",
    "GRP-DEEP-HEALTH-CONNECTIVITY",
    "GRP-DEEP-HEALTH-ACCELERATED",
    "FSX-EFA-CLIENTS",
}
BASE: dict[str, Any] = {
    "cluster_name": "hw",
    "node_provisioning_mode": "continuous",
    "instance_groups": [
        {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
        {"name": "workers", "instance_type": "ml.m5.xlarge", "count": 2},
    ],
}


def _found(storage: dict[str, Any] | None = None, **workers: Any) -> list[Problem]:
    config = copy.deepcopy(BASE)
    config["instance_groups"][1].update(workers)
    if storage is not None:
        config["storage"] = storage
    wanted = HARDWARE_RULES if storage is not None else HARDWARE_RULES - {"FSX-EFA-CLIENTS"}  # default storage: Lustre
    return [p for p in ClusterConfig.model_validate(config).problems() if p.rule in wanted]


def _rules(found: list[Problem]) -> list[tuple[str, str]]:
    return [(p.rule, p.level) for p in found]


@pytest.mark.parametrize("instance_type", ["ml.m8a.16xlarge", "ml.c8a.16xlarge", "ml.g7.2xlarge", "ml.c7g.xlarge"])
def test_two_threads_per_core_on_a_type_ec2_gives_one_is_refused(instance_type: str) -> None:
    """x86 types without SMT too: a Graviton name pattern could not decide these."""
    found = _found(instance_type=instance_type, threads_per_core=2)
    assert _rules(found) == [("GRP-THREADS-PER-CORE", "error")]
    text = str(found[0])
    assert "instance_groups[1].threads_per_core: got 2" in text
    assert f"EC2 on {instance_type[3:]}: DescribeInstanceTypes" in text
    assert "API_ClusterInstanceGroupSpecification.html" in text and "specify 1" in text


@pytest.mark.parametrize(
    ("instance_type", "threads"),
    [("ml.m5.xlarge", 2), ("ml.m8a.16xlarge", 1), ("ml.p5.48xlarge", 2), ("ml.g5.xlarge", 1), ("ml.g5.xlarge", 2)],
)
def test_a_value_the_type_supports_passes(instance_type: str, threads: int) -> None:
    """g5 with 1: EC2 lists only 2, HyperPod's API allows 1 on multithreaded types (docs/instance-types.md)."""
    assert _found(instance_type=instance_type, threads_per_core=threads) == []


def test_a_flexible_group_is_judged_type_by_type() -> None:
    found = _found(instance_types=["ml.m5.xlarge", "ml.m8g.xlarge"], threads_per_core=2)
    assert _rules(found) == [("GRP-THREADS-PER-CORE", "error")]
    assert "ml.m8g.xlarge has one thread per core" in str(found[0])


def test_a_type_whose_facts_are_unknown_is_not_judged_but_named() -> None:
    found = _found(instance_type="ml.p6e-gb200.36xlarge", threads_per_core=2, deep_health_checks=["InstanceStress"])
    assert _rules(found) == [("GRP-HARDWARE-UNKNOWN", "warning")]
    assert "threads_per_core 2 and deep_health_checks" in str(found[0])
    assert "aws ec2 describe-instance-types --instance-types p6e-gb200.36xlarge" in str(found[0])
    assert _found(instance_type="ml.p6e-gb200.36xlarge") == []


@pytest.mark.parametrize(
    ("instance_type", "expected"),
    [
        ("ml.c5.xlarge", [("GRP-DEEP-HEALTH-CONNECTIVITY", "error")]),
        ("ml.c7g.xlarge", [("GRP-DEEP-HEALTH-CONNECTIVITY", "error")]),
        ("ml.g5.xlarge", [("GRP-DEEP-HEALTH-ACCELERATED", "warning")]),
        ("ml.inf2.xlarge", [("GRP-DEEP-HEALTH-CONNECTIVITY", "error")]),  # Neuron: the Slurm page says GPU
        ("ml.p5.48xlarge", []),
        ("ml.g5.12xlarge", []),
        ("ml.trn1.32xlarge", [("GRP-DEEP-HEALTH-CONNECTIVITY", "error")]),
    ],
)
def test_instance_connectivity_follows_the_accelerator_kind(instance_type: str, expected: list[Any]) -> None:
    found = _found(instance_type=instance_type, deep_health_checks=["InstanceStress", "InstanceConnectivity"])
    assert _rules(found) == expected
    if expected and expected[0][1] == "error":
        assert "only supported on instances with multi-node GPU communication capabilities" in str(found[0])
        assert "sagemaker-hyperpod-resiliency-slurm-deep-health-checks.html" in str(found[0])


def test_instance_stress_runs_on_every_type() -> None:
    """The Slurm page: InstanceStress includes CPU, memory and disk stress, so a CPU type may ask for it."""
    assert _found(instance_type="ml.c5.xlarge", deep_health_checks=["InstanceStress"]) == []


LUSTRE = {"deployment_type": "PERSISTENT_2", "storage_capacity_gib": 4800, "throughput_mb_per_tib": 125}


@pytest.mark.parametrize(
    ("instance_type", "warned"),
    [("ml.p6-b200.48xlarge", True), ("ml.p5.48xlarge", True), ("ml.p5.4xlarge", False), ("ml.trn2.48xlarge", False)],
)
def test_gpudirect_storage_clients_are_the_types_the_fsx_page_names(instance_type: str, warned: bool) -> None:
    """Per type (p5.4xlarge has EFA but the FSx page does not name it), not per name prefix."""
    found = _found(storage=LUSTRE, instance_type=instance_type)
    assert _rules(found) == ([("FSX-EFA-CLIENTS", "warning")] if warned else [])
