"""Property: every config the rules accept synthesizes, and cfn-lint finds nothing in its template.

Hypothesis generates valid configs across modes, instance types, groups, storage types, data
repositories, networks, runtime options and users. Derandomized so CI runs the same examples each time;
change the seed (or remove ``derandomize``) locally to explore further.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperpod_cdk import TrainingClusterStack
from hyperpod_cdk.aws_data.instance_catalog import types_in
from hyperpod_cdk.core.config import parse_model
from hyperpod_cdk.rules import errors
from support import cfn_lint, fast_app, template_of
from training_runtime.hardware import INSTANCE_HARDWARE
from training_runtime.instance_facts import facts_for

LINT_REGIONS = ("us-east-1", "us-west-2")
OFFERED = sorted(set.intersection(*(set(types_in(r) or ()) for r in LINT_REGIONS)) & set(INSTANCE_HARDWARE))
CONTROLLERS = [t for t in ("ml.m5.xlarge", "ml.m5.2xlarge", "ml.c5.2xlarge", "ml.t3.medium") if t in OFFERED]
CAPACITY = {
    "SCRATCH_1": [1200, 2400, 3600],
    "SCRATCH_2": [1200, 2400, 4800],
    "PERSISTENT_1": [1200, 2400],
    "PERSISTENT_2": [1200, 2400, 4800],
}
THROUGHPUT: dict[str, list[int | None]] = {
    "SCRATCH_1": [None],
    "SCRATCH_2": [None],
    "PERSISTENT_1": [50, 100, 200],
    "PERSISTENT_2": [125, 250, 500, 1000],
}
NAME = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)


@st.composite
def compute_group(draw: Any, name: str) -> dict[str, Any]:
    instance_type = draw(st.sampled_from(OFFERED))
    group: dict[str, Any] = {"name": name, "instance_type": instance_type, "count": draw(st.integers(0, 4))}
    valid = facts_for(instance_type).valid_threads_per_core or (1,)  # type: ignore[union-attr]
    group["threads_per_core"] = draw(st.sampled_from(valid))
    if draw(st.booleans()):
        group["partition"] = draw(NAME)
    return group


@st.composite
def storage(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(CAPACITY)))
    section: dict[str, Any] = {
        "deployment_type": kind,
        "storage_capacity_gib": draw(st.sampled_from(CAPACITY[kind])),
        "file_system_type_version": "2.15" if kind == "PERSISTENT_2" else draw(st.sampled_from(["2.12", "2.15"])),
    }
    throughput = draw(st.sampled_from(THROUGHPUT[kind]))
    if throughput is not None:
        section["throughput_mb_per_tib"] = throughput
    if kind == "PERSISTENT_2" and draw(st.booleans()):
        section["metadata_iops"] = draw(st.sampled_from([1500, 3000, 12000, 24000]))
    if kind != "SCRATCH_1":
        count = draw(st.integers(0, 2))
        section["data_repositories"] = [
            {"name": f"repo{i}", "file_system_path": f"/data{i}", "bucket_prefix": draw(st.sampled_from(["", "x/"]))}
            for i in range(count)
        ]
    return section


@st.composite
def configs(draw: Any) -> dict[str, Any]:
    mode = draw(st.sampled_from(["api-driven", "lifecycle-driven"]))
    groups = [
        {"name": "controller", "role": "controller", "instance_type": draw(st.sampled_from(CONTROLLERS)), "count": 1}
    ]
    if draw(st.booleans()):
        groups.append(
            {"name": "login", "role": "login", "instance_type": draw(st.sampled_from(CONTROLLERS)), "count": 1}
        )
    for index in range(draw(st.integers(1, 3))):
        groups.append(draw(compute_group(f"compute{index}")))
    config: dict[str, Any] = {
        "cluster_name": draw(NAME),
        "mode": mode,
        "instance_groups": groups,
        "network": {
            "cidr": f"10.{draw(st.integers(0, 255))}.0.0/16",
            "private_subnet_cidr_mask": draw(st.integers(17, 22)),
        },
        "runtime": {
            "slurm": {
                "slurmd_timeout": draw(st.integers(1, 65535)),
                "cred_expire": draw(st.integers(70, 600)),
                "return_to_service": draw(st.sampled_from([0, 1, 2])),
            },
            "health": {"dcgm_level": draw(st.sampled_from([0, 1]))},
        },
    }
    if mode == "lifecycle-driven" or draw(st.booleans()):
        config["storage"] = draw(storage())
        if draw(st.booleans()):
            config["users"] = [{"name": "alice", "uid": 2001, "sudo": draw(st.booleans())}]
    else:
        config["storage"] = None
    return config


@pytest.mark.slow  # handed out first (tests/conftest.py)
@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(configs())
def test_every_config_the_rules_accept_synthesizes_and_lints_clean(data: dict[str, Any]) -> None:
    config = parse_model(data)
    assert errors(config.problems()) == [], data
    stack = TrainingClusterStack(fast_app(), "property", config=config)
    assert cfn_lint(template_of(stack)) == []
