"""The HyperPod API settings' rules at their edges (the rules table has one breaking row per rule)."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from hyperpod_cdk.core.config import parse_model
from hyperpod_cdk.core.errors import ConfigurationError
from training_runtime.problems import errors

CONTROLLER = {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1}


def found(group: dict[str, Any], **top: Any) -> list[tuple[str, str]]:
    """(rule, path) of every problem of a cluster with this compute group (continuous, so Spot is quiet; Spot's
    unconfirmed Slurm support accepted, GRP-SPOT-SLURM has tests of its own)."""
    config = parse_model(
        {
            "node_provisioning_mode": "continuous",
            "accept_unconfirmed": ["GRP-SPOT-SLURM"],
            "storage": None,
            "instance_groups": [CONTROLLER, {"name": "w", "instance_type": "ml.p5.48xlarge", "count": 4, **group}],
            **top,
        }
    )
    return [(p.rule, p.path) for p in config.problems() if p.level != "info"]  # infos: tests/test_levels.py


def update(expression: str = "cron(0 3 ? * SUN *)", **deployment: Any) -> dict[str, Any]:
    """A scheduled update; with a deployment only when one is given (a deployment is refused on Slurm)."""
    update: dict[str, Any] = {"schedule_expression": expression}
    if deployment:
        update["deployment"] = deployment
    return {"scheduled_update": update}


BATCHES = ("GRP-UPDATE-BATCHES-SLURM", "instance_groups[1].scheduled_update.deployment")


def rolled(group: dict[str, Any]) -> list[tuple[str, str]]:
    """The problems of a group with a scheduled deployment besides its refusal on Slurm (AWS: "Updating your cluster
    in batches is available only for HyperPod clusters integrated with Amazon EKS"): the deployment rules still judge
    it, for the API's own limits."""
    problems = found(group)
    assert BATCHES in problems
    return [p for p in problems if p != BATCHES]


def test_a_scheduled_deployment_is_refused_on_slurm() -> None:
    assert found(update()) == []
    assert found(update(wait_interval_s=600)) == [BATCHES]


@pytest.mark.parametrize(
    "expression", ["cron(0 3 ? * SUN *)", "cron(30 23 1 * ? 2099)", "cron(0 0 ? * 5L *)", "cron(5 4 ? */3 2#1 *)"]
)
def test_schedules_the_schema_allows_pass(expression: str) -> None:
    assert found(update(expression)) == []


@pytest.mark.parametrize(
    "expression", ["cron(0 3 ? * SUN *) ", "at(2027-01-01T00:00:00)", "xcron(0 3 ? * SUN *)", "cron(0 3 ? * SUN)"]
)
def test_schedules_outside_the_pattern_fail_whole(expression: str) -> None:
    assert found(update(expression)) == [
        ("GRP-UPDATE-SCHEDULE", "instance_groups[1].scheduled_update.schedule_expression")
    ]


SCHEDULE = ("GRP-UPDATE-SCHEDULE", "instance_groups[1].scheduled_update.schedule_expression")


@pytest.mark.parametrize("expression", ["cron(0 3 ? * SUN )", "cron( 3 ? * SUN *)", "cron(0 3 ?  SUN *)"])
def test_a_schedule_needs_all_six_fields(expression: str) -> None:
    """The schema's pattern lets the minutes, month and year be empty; AWS's AMI update page: "All six fields are
    required"."""
    assert found(update(expression)) == [SCHEDULE]
    (problem,) = [p for p in _problems(expression) if p.rule == SCHEDULE[0]]
    assert "left empty" in str(problem) and "All six fields are required" in str(problem)


def _problems(expression: str) -> list[Any]:
    config = parse_model(
        {
            "storage": None,
            "instance_groups": [
                CONTROLLER,
                {
                    "name": "w",
                    "instance_type": "ml.c5.xlarge",
                    "count": 1,
                    "scheduled_update": {"schedule_expression": expression},
                },
            ],
        }
    )
    return list(config.problems())


@pytest.mark.calendar
def test_a_schedule_year_runs_from_the_current_one() -> None:
    """AWS's field table: "Year Current year - 2099"; a past year never runs. The rule reads the real clock."""
    year = date.today().year
    assert found(update(f"cron(0 3 1 1 ? {year - 1})")) == [SCHEDULE]
    (problem,) = [p for p in _problems(f"cron(0 3 1 1 ? {year - 1})") if p.rule == SCHEDULE[0]]
    assert f"the year {year - 1} is past" in str(problem)
    assert found(update(f"cron(0 3 ? 12 MON {year})")) == []


def buffer(*expressions: str) -> list[str]:
    """The GRP-UPDATE-SCHEDULE-BUFFER warnings of a cluster whose compute groups have these schedules."""
    workers = [
        {"name": f"w{i}", "instance_type": "ml.c5.xlarge", "count": 1, "scheduled_update": {"schedule_expression": e}}
        for i, e in enumerate(expressions)
    ]
    config = parse_model({"storage": None, "instance_groups": [CONTROLLER, *workers]})
    return [str(p) for p in config.problems() if p.rule == "GRP-UPDATE-SCHEDULE-BUFFER"]


@pytest.mark.calendar
@pytest.mark.parametrize(
    ("first", "second", "words"),
    [
        ("cron(0 3 ? * SUN *)", "cron(0 3 ? * SUN *)", "at the same minute as the schedule of group 'w0'"),
        ("cron(0 3 ? * SUN *)", "cron(30 3 ? * SUN *)", "30 minutes after"),
        ("cron(30 23 ? * SAT *)", "cron(10 0 ? * SUN *)", "40 minutes after"),  # across midnight
        ("cron(10 0 ? * SUN *)", "cron(30 23 ? * SAT *)", "40 minutes before"),
        ("cron(0 3 15 * ? *)", "cron(0 3 ? * MON *)", "at the same minute"),  # some 15th is a Monday
        ("cron(0 3 1 1 ? 2099)", "cron(0 3 ? * THU *)", "on 2099-01-01"),  # a one-time schedule's year is compared
        # the page numbers days two ways (Monday 1 in its table, Sunday 1 in its # example): both are compared
        ("cron(0 3 ? * 1 *)", "cron(0 3 ? * SUN *)", "at the same minute"),
        ("cron(0 3 ? * 1 *)", "cron(0 3 ? * MON *)", "at the same minute"),
        ("cron(0 3 ? */3 1#2 *)", "cron(0 3 ? * MON *)", "at the same minute"),
    ],
)
def test_schedules_under_an_hour_apart_warn(first: str, second: str, words: str) -> None:
    (warning,) = buffer(first, second)
    assert warning.startswith("instance_groups[2].scheduled_update.schedule_expression")  # the later group
    assert words in warning and "we recommend that you have a time buffer in between schedules" in warning


@pytest.mark.calendar
@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("cron(0 3 ? * SUN *)", "cron(0 4 ? * SUN *)"),  # an hour is the floor
        ("cron(0 3 ? * SUN *)", "cron(0 3 ? * SAT *)"),
        ("cron(0 3 ? * 2 *)", "cron(0 3 ? * WED *)"),  # 2 is Tuesday or Monday, never Wednesday
        ("cron(0 3 1 1 ? 2099)", "cron(0 3 ? * FRI *)"),
        ("cron(0 3 31 2 ? *)", "cron(0 3 ? * MON *)"),  # never fires
    ],
)
def test_schedules_an_hour_or_more_apart_do_not(first: str, second: str) -> None:
    assert buffer(first, second) == []


def test_one_warning_per_later_group_and_none_for_one_schedule() -> None:
    assert buffer("cron(0 3 ? * SUN *)") == []
    three = buffer("cron(0 3 ? * SUN *)", "cron(0 3 ? * SUN *)", "cron(0 3 ? * SUN *)")
    assert [w.split(":")[0] for w in three] == [
        "instance_groups[2].scheduled_update.schedule_expression",
        "instance_groups[3].scheduled_update.schedule_expression",
    ]


def test_batch_sizes() -> None:
    where = "instance_groups[1].scheduled_update.deployment"
    assert rolled(update(maximum_batch_size={"type": "CAPACITY_PERCENTAGE", "value": 100})) == []
    assert rolled(update(maximum_batch_size={"type": "INSTANCE_COUNT", "value": 4})) == []
    assert rolled(update(maximum_batch_size={"type": "CAPACITY_PERCENTAGE", "value": 101})) == [
        ("GRP-UPDATE-BATCH", f"{where}.maximum_batch_size.value")
    ]
    assert rolled(update(maximum_batch_size={"type": "INSTANCE_COUNT", "value": 0})) == [
        ("GRP-UPDATE-BATCH", f"{where}.maximum_batch_size.value")
    ]
    assert rolled(update(rollback_maximum_batch_size={"type": "INSTANCE_COUNT", "value": 1})) == [
        ("GRP-UPDATE-BATCH", f"{where}.rollback_maximum_batch_size")
    ]


def test_wait_and_alarms() -> None:
    where = "instance_groups[1].scheduled_update.deployment"
    assert rolled(update(wait_interval_s=3600, rollback_alarms=[f"a{i}" for i in range(10)])) == []
    assert rolled(update(wait_interval_s=-1)) == [("GRP-UPDATE-DEPLOYMENT", f"{where}.wait_interval_s")]
    assert rolled(update(rollback_alarms=[f"a{i}" for i in range(11)])) == [
        ("GRP-UPDATE-DEPLOYMENT", f"{where}.rollback_alarms")
    ]
    assert rolled(update(rollback_alarms=["  "])) == [("GRP-UPDATE-DEPLOYMENT", f"{where}.rollback_alarms[0]")]


def test_min_count_and_capacity() -> None:
    assert found({"min_count": 4, "capacity": "spot"}) == []
    assert found({"min_count": 0}) == []
    assert found({"min_count": 5}) == [("GRP-MIN-COUNT", "instance_groups[1].min_count")]
    assert found({"capacity": "spot"}, node_provisioning_mode=None) == [
        ("GRP-SPOT-CONTINUOUS", "instance_groups[1].capacity")
    ]
    login = {"name": "login", "role": "login", "instance_type": "ml.m5.large", "count": 1, "capacity": "spot"}
    config = parse_model(
        {
            "storage": None,
            "node_provisioning_mode": "continuous",
            "accept_unconfirmed": ["GRP-SPOT-SLURM"],
            "instance_groups": [CONTROLLER, login, {"name": "w", "instance_type": "ml.c5.xlarge", "count": 1}],
        }
    )
    assert [(p.rule, p.path) for p in errors(config.problems())] == [("GRP-CAPACITY", "instance_groups[1].capacity")]


def test_image_ids() -> None:
    assert found({"image_id": "ami-0123abcd"}) == []
    assert found({"image_id": "ami-0123456789abcdef0"}) == []
    assert found({"image_id": "ami-0123ABCD"}) == [("GRP-IMAGE-ID", "instance_groups[1].image_id")]
    assert found({"image_id": "default"}) == []
    assert found({"image_id": "Default"}) == [("GRP-IMAGE-ID", "instance_groups[1].image_id")]


def test_override_vpc_lists_and_interfaces() -> None:
    net = {
        "vpc_id": "vpc-0123456789abcdef0",
        "subnet_id": "subnet-0123456789abcdef0",
        "availability_zone": "us-west-2a",
    }
    ok = {"subnet_ids": ["subnet-0123456789abcdef1"], "security_group_ids": ["sg-0123abcd"]}
    assert found({"override_vpc": ok, "network_interface": "efa-only"}, network=net) == []
    too_many = {**ok, "security_group_ids": [f"sg-0123abc{i}" for i in range(6)]}
    assert found({"override_vpc": too_many}, network=net) == [
        ("GRP-OVERRIDE-VPC", "instance_groups[1].override_vpc.security_group_ids")
    ]
    assert found({"override_vpc": {**ok, "subnet_ids": []}}, network=net) == [
        ("GRP-OVERRIDE-VPC", "instance_groups[1].override_vpc.subnet_ids")
    ]


def patch(strategy: str = "when-idle", **deployment: Any) -> dict[str, Any]:
    return {"auto_patch": {"strategy": strategy, "deployment": deployment}}


REFUSED = ("GRP-AUTO-PATCH-SLURM", "instance_groups[1].auto_patch")


def test_automatic_patching_is_refused_on_slurm() -> None:
    """AWS documents auto-patching for EKS clusters only (sagemaker-hyperpod-ami-auto-patching, prerequisites)."""
    assert found(patch("when-all-idle")) == [REFUSED]
    assert found(update()) == []


def patched(group: dict[str, Any]) -> list[tuple[str, str]]:
    """The problems of a group with auto_patch besides its refusal: the deployment rules still judge it."""
    problems = found(group)
    assert REFUSED in problems
    return [p for p in problems if p != REFUSED]


def test_automatic_patching_shares_the_deployment_rules() -> None:
    where = "instance_groups[1].auto_patch.deployment"
    assert patched(patch("when-all-idle", maximum_batch_size={"type": "INSTANCE_COUNT", "value": 4})) == []
    assert [p for p in patched({**patch(), **update(wait_interval_s=0)}) if p != BATCHES] == []
    assert patched(patch(maximum_batch_size={"type": "INSTANCE_COUNT", "value": 5})) == [
        ("GRP-UPDATE-BATCH", f"{where}.maximum_batch_size.value")
    ]
    assert patched(patch(rollback_maximum_batch_size={"type": "INSTANCE_COUNT", "value": 1})) == [
        ("GRP-UPDATE-BATCH", f"{where}.rollback_maximum_batch_size")
    ]
    assert patched(patch(wait_interval_s=3601)) == [("GRP-UPDATE-DEPLOYMENT", f"{where}.wait_interval_s")]
    assert patched(patch(rollback_alarms=[""])) == [("GRP-UPDATE-DEPLOYMENT", f"{where}.rollback_alarms[0]")]


def test_patching_strategies_are_the_two_hyperpod_has() -> None:
    with pytest.raises(ConfigurationError) as error:
        found(patch("weekly"))
    assert "instance_groups[1].auto_patch.strategy" in str(error.value)


KEY = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SECRET = "arn:aws:secretsmanager:us-west-2:111122223333:secret:slurm-db-AbCdEf"


def test_volume_keys() -> None:
    where = "instance_groups[1].volume_kms_key_arn"
    assert found({"volume_kms_key_arn": KEY, "ebs_volume_gib": 100}) == []
    assert found({"volume_kms_key_arn": KEY}, organization={"kms_key_arn": KEY}) == []
    assert found({"volume_kms_key_arn": KEY.replace(":key/", ":alias/")}) == [("GRP-VOLUME-KEY", where)]
    assert found({"volume_kms_key_arn": KEY}, node_provisioning_mode=None) == [("GRP-VOLUME-KEY-CONTINUOUS", where)]
    other = KEY.replace("1234abcd", "9999abcd")
    assert found({"volume_kms_key_arn": KEY}, organization={"kms_key_arn": other}) == [("ORG-VOLUME-KEY", where)]


def accounting(host: str = "acct.example.com", **options: Any) -> dict[str, Any]:
    secret = "arn:aws:secretsmanager:us-west-2:111122223333:secret:slurm-db-AbCdEf"
    external = {"enabled": True, "database": "external", "host": host, "password_secret_arn": secret}
    return {"runtime": {"accounting": {**external, "ca_bundle_sha256": "0" * 64, **options}}}


def test_the_endpoint_hyperpod_is_given_has_the_apis_form() -> None:
    assert found({}, **accounting()) == []
    assert found({}, **accounting("10.0.12.7")) == []
    assert found({}, **accounting("db_1.example.com")) == [("CL-ACCOUNTING-ENDPOINT", "runtime.accounting.host")]
    assert found({}, **accounting("a" * 64 + ".example.com")) == [("CL-ACCOUNTING-ENDPOINT", "runtime.accounting.host")]


def test_where_the_runtime_runs_slurmdbd_any_host_it_can_reach_is_fine() -> None:
    """Not continuous, lifecycle-driven, or accounting off: HyperPod gets no AccountingDatabase, so the API's
    endpoint form does not apply (the runtime writes the host into its own slurmdbd.conf)."""
    odd = "db_1.example.com"
    assert found({}, **accounting(odd), node_provisioning_mode=None) == [
        ("CL-ACCOUNTING-CONTINUOUS", "runtime.accounting.database")
    ]
    assert found({}, **accounting(odd, enabled=False)) == []
    lifecycle = found({}, **accounting(odd), node_provisioning_mode=None, mode="lifecycle-driven", storage={})
    assert {r for r, _ in lifecycle} & {"CL-ACCOUNTING-CONTINUOUS", "CL-ACCOUNTING-ENDPOINT"} == set()


def test_an_external_database_without_continuous_provisioning_stays_valid_with_a_warning() -> None:
    """Valid before the API path existed, valid now: the runtime runs slurmdbd, and the warning says how to switch."""
    workers = {"name": "w", "instance_type": "ml.c5.xlarge", "count": 2}
    config = parse_model({"storage": None, "instance_groups": [CONTROLLER, workers], **accounting()})
    [problem] = config.problems()
    assert (problem.rule, problem.level) == ("CL-ACCOUNTING-CONTINUOUS", "warning")
    assert "node_provisioning_mode: continuous" in str(problem)
    local = parse_model(
        {"storage": None, "instance_groups": [CONTROLLER, workers], "runtime": {"accounting": {"enabled": True}}}
    )
    assert local.problems() == []


ZFS_ID = "fs-0123456789abcdef1"


def openzfs(mount_path: str = "/home", dns_name: str = f"{ZFS_ID}.fsx.us-west-2.amazonaws.com") -> dict[str, Any]:
    existing = {"file_system_id": ZFS_ID, "dns_name": dns_name, "security_group_id": "sg-0123456789abcdef2"}
    return {"storage_openzfs": {"existing": existing, "mount_path": mount_path}}


def test_openzfs_paths_and_names() -> None:
    assert found({}, **openzfs()) == []
    assert found({}, **openzfs("/fsx")) == []  # no Lustre here (storage: null): the path is free
    beside_lustre = found({}, **openzfs("/fsx"), storage={"data_repositories": []})
    assert [f for f in beside_lustre if f[0].startswith("ZFS")] == [("ZFS-LUSTRE-PATH", "storage_openzfs.mount_path")]
    assert found({}, **openzfs("/opt/ml/home")) == [("ZFS-MOUNT-PATH", "storage_openzfs.mount_path")]
    assert found({}, **openzfs(dns_name="fs-0123abcd.x" + "y" * 270)) == [
        ("ZFS-EXISTING-IDS", "storage_openzfs.existing.dns_name")
    ]
    assert found({}, **openzfs(dns_name="fs-0123abcd.fsx.us-west-2.amazonaws.com")) == []
    # The pattern allows it (253 characters after the dot); only the schema's 275-character limit does not.
    assert found({}, **openzfs(dns_name="fs-" + "0" * 20 + "." + "a" * 253)) == [
        ("ZFS-EXISTING-IDS", "storage_openzfs.existing.dns_name")
    ]
