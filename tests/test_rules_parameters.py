"""The launch-choice rules beyond the one-row table: every failing value named by its own path, all at once,
and the worst case of several choices together (the subnet must hold every group at its largest)."""

from __future__ import annotations

from typing import Any

from hyperpod_cdk.core.config import parse_model
from training_runtime.problems import errors

CONTROLLER = {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1}


def problems(workers: dict[str, Any], choice: dict[str, Any], **extra: Any) -> list[tuple[str, str]]:
    config = parse_model(
        {
            "instance_groups": [CONTROLLER, {"name": "workers", **workers}],
            "parameters": {"instance_groups": {"workers": choice}},
            **extra,
        }
    )
    return [(p.rule, p.path) for p in errors(config.problems())]


def test_each_failing_value_is_named_by_its_path() -> None:
    found = problems(
        {"instance_type": "ml.c5.xlarge", "count": 2},
        {
            "instance_types": ["ml.c5.xlarge", "ml.c5.huge", "c5.xlarge", "ml.c5.2xlarge"],
            "count": {"min": 0, "max": 7000},
        },
    )
    assert found == [
        ("PAR-CHOICE", "parameters.instance_groups.workers.instance_types[1]"),
        ("PAR-CHOICE", "parameters.instance_groups.workers.instance_types[2]"),
        ("PAR-CHOICE", "parameters.instance_groups.workers.count.max"),
    ]


def test_every_group_at_its_largest_choice_must_fit_the_subnet() -> None:
    """20 x g5.8xlarge fits a /24, and so do 2 x p5.48xlarge; 20 x p5.48xlarge (33 addresses each) does not."""
    workers = {"instance_type": "ml.g5.8xlarge", "count": 2}
    choice = {"instance_types": ["ml.g5.8xlarge", "ml.p5.48xlarge"], "count": {"min": 1, "max": 20}}
    network = {"network": {"private_subnet_cidr_mask": 24}}
    config = parse_model(
        {
            "instance_groups": [CONTROLLER, {"name": "workers", **workers}],
            "parameters": {"instance_groups": {"workers": choice}},
            "storage": {"efa_enabled": True, "data_repositories": []},
            **network,
        }
    )
    [problem] = errors(config.problems())
    assert (problem.rule, problem.path) == ("PAR-CHOICE", "parameters.instance_groups")
    assert "every group at its largest choice (workers: 20 x ml.p5.48xlarge)" in problem
    assert "NET-SUBNET-CAPACITY" in problem
    choice["count"] = {"min": 1, "max": 7}  # 7 x 33 + 1 = 232 of 251 addresses
    assert problems(workers, choice, storage={"efa_enabled": True, "data_repositories": []}, **network) == []


def test_a_prefix_chosen_at_launch_has_a_default_in_the_parameter_form() -> None:
    storage = {
        "data_repositories": [
            {"name": "data", "file_system_path": "/data", "bucket_name": "team-data", "bucket_prefix": "a//b"}
        ]
    }
    config = parse_model({"storage": storage, "parameters": {"data_repositories": {"data": {"bucket_prefix": True}}}})
    assert [(p.rule, p.path) for p in config.problems()] == [
        ("PAR-DEFAULT", "storage.data_repositories[0].bucket_prefix")
    ]
    storage["data_repositories"][0]["bucket_prefix"] = "/a/b"  # leading and trailing '/' are normalised
    config = parse_model({"storage": storage, "parameters": {"data_repositories": {"data": {"bucket_prefix": True}}}})
    assert config.problems() == []
