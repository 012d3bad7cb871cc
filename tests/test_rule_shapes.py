"""The rule shapes (training_runtime.rule_shapes, hyperpod_cdk.rules.shapes): each refuses what is outside its set,
range or pattern with the field's path, the value and what is allowed; "needs X when Y" fires only with Y and
without X; the CDK side skips CDK tokens and counts each check as its caller's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from hyperpod_cdk.core.config import NetworkConfig
from hyperpod_cdk.model import InstanceGroup
from hyperpod_cdk.preflight.account import Unchecked
from hyperpod_cdk.preflight.resource_checks import each_resource
from hyperpod_cdk.rules import shapes
from hyperpod_cdk.rules.groups import each_group
from hyperpod_cdk.rules.view import ClusterView
from training_runtime import option_types, rule_shapes
from training_runtime.options import options_problems
from training_runtime.problems import Problem, RuleBook
from training_runtime.render import slurmdbd_conf


def at(*pairs: tuple[str, Any]) -> Any:
    """A shape's values: the same pairs whatever the rule's arguments."""
    return lambda *args: list(pairs)


def test_one_of_refuses_a_value_outside_the_set_with_its_path_value_and_the_set() -> None:
    check = rule_shapes.one_of("A mode is fast or slow.", at(("a.mode", "quick"), ("b.mode", "fast")), ("fast", "slow"))
    [problem] = check()
    assert (problem.path, problem.got, problem.expected) == ("a.mode", "quick", "allowed: fast, slow")
    assert str(problem) == "a.mode: got 'quick'; allowed: fast, slow"
    assert check.__doc__ == "A mode is fast or slow."


def test_one_of_takes_its_own_words_and_fix() -> None:
    check = rule_shapes.one_of("doc", at(("level", 3)), (0, 1), "allowed: 0 (off), 1", fix="use 1")
    assert [str(p) for p in check()] == ["level: got 3; allowed: 0 (off), 1. Fix: use 1"]
    assert list(rule_shapes.one_of("doc", at(("level", 1)), (0, 1))()) == []


def test_within_refuses_below_and_above_and_keeps_both_bounds() -> None:
    values = at(("p", 0), ("p", 1), ("p", 5), ("p", 6))
    check = rule_shapes.within("doc", values, 1, 5, "allowed: {low} to {high} GiB")
    assert [(p.path, p.got, p.expected) for p in check()] == [
        ("p", 0, "allowed: 1 to 5 GiB"),
        ("p", 6, "allowed: 1 to 5 GiB"),
    ]


def test_within_without_a_high_bound_has_no_ceiling() -> None:
    check = rule_shapes.within("doc", at(("disk", -1), ("disk", 10**9)), 0, None, "expected {low} or more")
    assert [(p.got, p.expected) for p in check()] == [(-1, "expected 0 or more")]


def test_matches_refuses_what_does_not_match_from_its_start_and_skips_unset_values() -> None:
    pattern = re.compile(r"^\d{2}\.\d{2}$")
    check = rule_shapes.matches(
        "doc", at(("v", "x25.11"), ("v", None), ("v", "25.11")), pattern, "a series", "use 25.11"
    )
    assert [str(p) for p in check()] == ["v: got 'x25.11'; a series. Fix: use 25.11"]


def test_needs_fires_only_when_y_is_present_and_x_does_not_hold() -> None:
    def check_with(present: list[tuple[str, Any]], satisfied: bool, show_value: bool = True) -> list[str]:
        check = rule_shapes.needs(
            "doc", at(*present), lambda *args: satisfied, "needs continuous", "set it", show_value=show_value
        )
        return [str(p) for p in check()]

    assert check_with([("g[0].scaling", {"max": 4})], satisfied=False) == [
        "g[0].scaling: got {'max': 4}; needs continuous. Fix: set it"
    ]
    assert check_with([("g[0].scaling", "s")], satisfied=False, show_value=False) == [
        "g[0].scaling: needs continuous. Fix: set it"
    ]
    assert check_with([("g[0].scaling", "s")], satisfied=True) == []
    assert check_with([], satisfied=False) == []


def test_a_shapes_check_counts_as_its_callers_and_documents_the_rule() -> None:
    book = RuleBook("test")
    check = book.rule("T-PORT", "runtime", "runtime.port")(
        rule_shapes.within("The port is 1-65535.", at(("port", 0)), 1, 65535, "expected {low}-{high}")
    )
    assert check.__module__ == __name__
    assert book.rules[0].doc == "The port is 1-65535."
    assert [(p.rule, p.path) for p in book.run()] == [("T-PORT", "port")]


def test_the_cdk_shapes_skip_tokens_and_count_as_the_rule_module() -> None:
    token = 20000  # a number CDK's token would stand for: out of range, but not known at synth
    view = ClusterView(
        sections=frozenset({"instance_groups"}),
        groups=(
            InstanceGroup(name="a", instance_type="ml.c5.xlarge", count=1, ebs_volume_gib=0),
            InstanceGroup(name="b", instance_type="ml.c5.xlarge", count=1, ebs_volume_gib=token),
            InstanceGroup(name="c", instance_type="ml.c5.xlarge", count=1),
        ),
        is_unresolved=lambda value: value == token,
    )
    check = shapes.within("doc", each_group("ebs_volume_gib"), 1, 16384, "allowed: {low} to {high} GiB")
    assert check.__module__ == __name__
    assert [(p.path, p.got) for p in check(view)] == [("instance_groups[0].ebs_volume_gib", 0)]
    assert [path for path, _ in each_group("ebs_volume_gib", set_only=True)(view)] == [
        "instance_groups[0].ebs_volume_gib",
        "instance_groups[1].ebs_volume_gib",
    ]
    needs = shapes.needs("doc", each_group("ebs_volume_gib", set_only=True), lambda v: False, "x", show_value=False)
    assert [p.path for p in needs(view)] == ["instance_groups[0].ebs_volume_gib", "instance_groups[1].ebs_volume_gib"]
    assert shapes.field_of("observability", lambda v: v.observability, "workspace_arn")(view) == []


def test_given_fields_are_the_fields_the_file_sets_in_name_order() -> None:
    network = NetworkConfig.model_validate(
        {"vpc_id": "vpc-0123456789abcdef0", "flow_logs": False, "cidr": "10.1.0.0/16"}
    )
    view = ClusterView(sections=frozenset({"network"}), network=network)
    values = shapes.given_fields("network", lambda v: v.network, ("cidr", "flow_logs", "private_subnet_cidr_mask"))
    assert values(view) == [("network.cidr", "10.1.0.0/16"), ("network.flow_logs", False)]
    assert values(ClusterView(sections=frozenset({"network"}))) == []


def test_the_tcp_port_range_is_one_definition_for_the_option_rule_and_the_renderer() -> None:
    assert slurmdbd_conf.TCP_PORTS is option_types.TCP_PORTS
    refused = {
        port: [p for p in options_problems({"accounting": {"port": port}}) if p.path == "options.accounting.port"]
        for port in (0, 1, 65535, 65536)
    }
    assert [port for port, problems in refused.items() if problems] == [0, 65536]
    assert refused[0][0].expected == "expected 1-65535"


def test_each_resource_guards_every_look_up_and_goes_on() -> None:
    account = SimpleNamespace(region="us-west-2")
    view = ClusterView(sections=frozenset({"network"}), account=account)  # type: ignore[arg-type]
    seen: list[tuple[object, str, str]] = []

    def judge(account: Any, where: str, resource: str) -> Iterator[Problem]:
        seen.append((account, where, resource))
        if resource == "sg-denied":
            raise Unchecked("ec2:DescribeSecurityGroups", "is denied", denied=True)
        yield Problem(where, "no such security group", got=resource)

    found = list(each_resource(view, [("a", "sg-missing"), ("b", "sg-denied"), ("c", "sg-other")], judge))
    assert [(p.path, p.got, p.level) for p in found] == [
        ("a", "sg-missing", "error"),
        ("b", "sg-denied", "warning"),
        ("c", "sg-other", "error"),
    ]
    assert "could not be checked: ec2:DescribeSecurityGroups is denied" in found[1]
    assert [s[0] for s in seen] == [account] * 3
    assert list(each_resource(ClusterView(sections=frozenset()), [], judge)) == []  # no account needed for nothing
