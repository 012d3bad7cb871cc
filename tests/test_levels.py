"""Levels and suppressions (docs/rules.md, "Levels and suppression"): an info level shown by validate and shared with
the cfn-lint I-rules; ``suppress:`` silences a warning or info with a reason that reaches the template's metadata
and cfn-lint's ignore list; an error the API raises, an unknown id and a missing reason are refused;
``accept_unconfirmed`` is the former form."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import assertions

from hyperpod_cdk import TrainingClusterStack
from hyperpod_cdk.aws_data.api_support import row_problems, support_row, support_table
from hyperpod_cdk.cfnlint_rules import RULES
from hyperpod_cdk.core.config import parse_model
from hyperpod_cdk.core.suppress import ACCEPTED_REASON, Suppression, silenced
from hyperpod_cdk.rules import REGISTRY, all_rules
from hyperpod_cdk.validate import validate_command, validate_file
from support import cfn_lint, fast_app, template_of
from training_runtime.problems import ERROR, LEVEL_LETTERS, Rule

SECRET = "arn:aws:secretsmanager:us-west-2:111122223333:secret:slurm-db-AbCdEf"
CONTINUOUS: dict[str, Any] = {
    "cluster_name": "levels",
    "node_provisioning_mode": "continuous",
    "storage": None,
    "instance_groups": [
        {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
        {"name": "workers", "instance_type": "ml.c5.xlarge", "count": 2},
    ],
}
ACCOUNTING = {
    **CONTINUOUS,
    "runtime": {
        "accounting": {
            "enabled": True,
            "database": "external",
            "host": "acct.example.com",
            "password_secret_arn": SECRET,
        }
    },
}
SPOT_REASON = "checked in us-west-2 with a test cluster on 2026-11-28"


def _spot(**top: Any) -> dict[str, Any]:
    config = copy.deepcopy(CONTINUOUS)
    config["instance_groups"][1]["capacity"] = "spot"
    return {**config, **top}


def _write(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _cluster(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The synthesized template and its cluster resource."""
    template = template_of(TrainingClusterStack(fast_app(), "s", config=parse_model(config)))
    (cluster,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    return template, cluster


def _ours(template: dict[str, Any]) -> list[str]:
    ours = {cls.id for cls in RULES.values()}
    return [f.split()[0] for f in cfn_lint(template, include=["I"]) if f.split()[0] in ours]


# --- the info level, end to end


def test_an_info_is_shown_by_validate_and_never_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, ACCOUNTING)
    assert validate_command(path, strict=True) == 0
    captured = capsys.readouterr()
    assert f"{path}: info: runtime.accounting.database: got 'external'; HyperPod is given" in captured.err
    assert "[CL-ACCOUNTING-PERMANENT]" in captured.err and "1 info(s)" in captured.out
    assert validate_command(path, as_json=True, strict=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is True
    assert [(p["rule"], p["level"]) for p in report["problems"]] == [("CL-ACCOUNTING-PERMANENT", "info")]


def test_the_same_row_is_an_i_rule_in_cfn_lint() -> None:
    row = support_row("accounting-permanent")
    assert (row.level, row.cfn_lint, row.rule) == ("info", "I9106", "CL-ACCOUNTING-PERMANENT")
    template, _ = _cluster(ACCOUNTING)
    assert _ours(template) == ["I9106"]


def test_a_cfn_lint_rules_letter_is_its_rows_level() -> None:
    registered = {r.id: r for r in all_rules()}
    for row in support_table():
        if row.own_cfn_lint_rule:
            assert RULES[row.id].id[0] == LEVEL_LETTERS[row.level], row.id
        if row.rule is not None:
            assert registered[row.rule].level == row.level, row.id
    wrong = replace(support_row("spot-slurm"), cfn_lint="I9109")
    assert any("I9109 is info-level but the row's level is warning" in p for p in row_problems(wrong))


# --- suppressing a warning


def test_a_suppressed_warning_leaves_validate_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _write(tmp_path, _spot())
    assert "GRP-SPOT-SLURM" in {p.rule for p in validate_file(plain)[1]}
    path = _write(tmp_path, _spot(suppress=[{"rule": "GRP-SPOT-SLURM", "reason": SPOT_REASON}]))
    assert validate_command(path, strict=True) == 0
    captured = capsys.readouterr()
    assert "GRP-SPOT-SLURM" not in captured.err and "1 suppressed (--show-suppressed lists them)" in captured.out
    assert validate_command(path, show_suppressed=True) == 0
    assert "suppressed warning: instance_groups[1].capacity: got 'spot'" in capsys.readouterr().err
    validate_command(path, as_json=True)
    report = json.loads(capsys.readouterr().out)
    assert report["problems"] == []
    assert [(s["rule"], s["level"], s["suppressed"]) for s in report["suppressed"]] == [
        ("GRP-SPOT-SLURM", "warning", SPOT_REASON)
    ]


def test_a_suppressed_warning_is_in_the_template_and_cfn_lint_skips_it() -> None:
    template, cluster = _cluster(_spot(suppress=[{"rule": "GRP-SPOT-SLURM", "reason": SPOT_REASON}]))
    assert cluster["Metadata"]["hyperpod-cdk"] == {"suppressed": [{"rule": "GRP-SPOT-SLURM", "reason": SPOT_REASON}]}
    assert cluster["Metadata"]["cfn-lint"] == {"config": {"ignore_checks": ["W9109"]}}
    assert _ours(template) == []
    del cluster["Metadata"]
    assert _ours(template) == ["W9109"]


def test_a_suppressed_warning_is_not_annotated_at_synth() -> None:
    stack = TrainingClusterStack(
        fast_app(), "s", config=parse_model(_spot(suppress=[{"rule": "GRP-SPOT-SLURM", "reason": SPOT_REASON}]))
    )
    warnings = assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.any_value())
    assert not [w for w in warnings if "GRP-SPOT-SLURM" in json.dumps(w.entry.data)]


# --- what cannot be suppressed, and bad entries


def _problems(config: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(p.rule, p.level, p.path, str(p)) for p in parse_model(config).problems()]


def test_an_error_the_api_raises_cannot_be_suppressed() -> None:
    config = {**CONTINUOUS, "slurm_config_strategy": "Merge"}
    found = _problems({**config, "suppress": [{"rule": "CL-CONTINUOUS-STRATEGY", "reason": "I know"}]})
    assert ("CL-CONTINUOUS-STRATEGY", ERROR) in {(r, lv) for r, lv, _, _ in found}
    (refusal,) = [f for f in found if f[0] == "CL-SUPPRESS"]
    assert refusal[1:3] == (ERROR, "suppress[0].rule")
    assert "an error the HyperPod API raises (data/api_support.yaml row continuous-no-strategy" in refusal[3]


def test_an_error_marked_as_our_opinion_is_suppressible_and_others_are_not() -> None:
    def check(view: Any) -> list[Any]:
        """A check."""
        return []

    rules = [
        Rule("E-OPINION", "cluster", "x", check, suppressible=True),
        Rule("E-API", "cluster", "x", check),
        Rule("W-ANY", "cluster", "x", check, level="warning", suppressible=True),
    ]
    listed = [Suppression(r.id, "because") for r in rules] + [Suppression("W-ANY", "  ")]
    assert silenced(listed, rules) == {"E-OPINION": "because", "W-ANY": "because"}
    # The one error that is our opinion: a launch limited to a team's buckets (a one-team account may lift it).
    assert [r.id for r in REGISTRY.rules if r.level == ERROR and r.suppressible] == ["PAR-BUCKET-SCOPE"]


def test_an_unknown_rule_id_names_close_ones() -> None:
    found = _problems(_spot(suppress=[{"rule": "GRP-SPOT-SLRM", "reason": "typo"}]))
    (unknown,) = [f for f in found if f[0] == "CL-SUPPRESS"]
    assert unknown[2] == "suppress[0].rule" and "no rule has this id (close: GRP-SPOT-SLURM" in unknown[3]
    assert "GRP-SPOT-SLURM" in {f[0] for f in found}


def test_a_suppression_needs_a_reason() -> None:
    with pytest.raises(Exception, match=r"suppress\.0\.reason|suppress\[0\]\.reason"):
        parse_model(_spot(suppress=[{"rule": "GRP-SPOT-SLURM"}]))
    found = _problems(_spot(suppress=[{"rule": "GRP-SPOT-SLURM", "reason": " "}]))
    assert [(f[0], f[2]) for f in found if f[1] == ERROR] == [("CL-SUPPRESS", "suppress[0].reason")]
    assert "GRP-SPOT-SLURM" in {f[0] for f in found}  # without a reason, nothing is silenced


def test_a_suppression_that_silences_nothing_is_an_info() -> None:
    found = _problems({**CONTINUOUS, "suppress": [{"rule": "GRP-SPOT-SLURM", "reason": SPOT_REASON}]})
    assert [(f[0], f[1], f[2]) for f in found] == [("CL-SUPPRESS-UNUSED", "info", "suppress[0].rule")]


# --- accept_unconfirmed, the former form


def test_accept_unconfirmed_is_a_suppression_with_the_fixed_reason(tmp_path: Path) -> None:
    config = _spot(accept_unconfirmed=["GRP-SPOT-SLURM"])
    found, hidden = parse_model(config).judged()
    assert [(p.rule, p.level, p.path) for p in found] == [("CL-ACCEPT-UNCONFIRMED-FORM", "info", "accept_unconfirmed")]
    assert "write suppress: [{rule: GRP-SPOT-SLURM, reason:" in found[0]
    assert [(s.problem.rule, s.reason) for s in hidden] == [("GRP-SPOT-SLURM", ACCEPTED_REASON)]
    _, cluster = _cluster(config)
    assert cluster["Metadata"]["hyperpod-cdk"] == {
        "suppressed": [{"rule": "GRP-SPOT-SLURM", "reason": ACCEPTED_REASON}]
    }
    assert cluster["Metadata"]["cfn-lint"] == {"config": {"ignore_checks": ["W9109"]}}


def test_accept_unconfirmed_still_lists_only_unconfirmed_rules() -> None:
    config = _spot(node_provisioning_mode=None, accept_unconfirmed=["GRP-SPOT-SLURM", "GRP-SPOT-CONTINUOUS"])
    found, hidden = parse_model(config).judged()
    assert {(p.rule, p.path) for p in found if p.level != "info"} == {
        ("CL-ACCEPT-UNCONFIRMED", "accept_unconfirmed[1]"),
        ("GRP-SPOT-CONTINUOUS", "instance_groups[1].capacity"),  # a warning, but not of unconfirmed support
    }
    assert [s.problem.rule for s in hidden] == ["GRP-SPOT-SLURM"]


def test_an_info_is_annotated_at_synth() -> None:
    stack = TrainingClusterStack(fast_app(), "s", config=parse_model(ACCOUNTING))
    infos = assertions.Annotations.from_stack(stack).find_info("*", assertions.Match.any_value())
    paths = [i.id for i in infos if "hyperpod-cdk:CL-ACCOUNTING-PERMANENT" in json.dumps(i.entry.data)]
    assert len(paths) == 2 and any(p.endswith("/Cluster") for p in paths), paths  # the stack's and the construct's


def test_a_suppressed_online_rule_is_not_run() -> None:
    """``validate --online`` and ``preflight`` run the online rules apart (hyperpod_cdk.preflight.runner)."""
    from hyperpod_cdk.preflight.runner import run_online
    from hyperpod_cdk.rules import ClusterView

    class Stub:
        def acting_for(self, rule: str) -> None:
            pass

    def look(view: Any) -> list[Any]:
        """A look-up that warns."""
        from training_runtime.problems import Problem

        return [Problem("x", "looked")]

    rule = Rule("AWS-LOOK", "cluster", "x", look, needs=("aws",), level="warning", suppressible=True)
    plain = ClusterView.of_config(parse_model(CONTINUOUS))
    assert [p.rule for p in run_online(plain, Stub(), [rule])] == ["AWS-LOOK"]  # type: ignore[arg-type]
    quiet = replace(plain, suppress=(Suppression("AWS-LOOK", "known"),))
    assert run_online(quiet, Stub(), [rule]) == []  # type: ignore[arg-type]


def test_a_construct_takes_a_suppression_as_a_mapping_too() -> None:
    assert Suppression.of({"rule": "GRP-SPOT-SLURM", "reason": "r"}) == Suppression("GRP-SPOT-SLURM", "r")
    assert Suppression.of(Suppression("A", "b")) == Suppression("A", "b")
