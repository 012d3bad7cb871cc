"""``hyperpod-local`` (and ``hyperpod-cdk local``) ends an unexpected error in one line that names what failed and
where its traceback was saved; ``--debug`` shows the traceback instead; ``status`` of a cluster with no Slurm node
says why sinfo is empty. No root needed: ``LocalCluster.up`` is replaced by one that fails as a bug would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hyperpod_local import cli
from hyperpod_local.cluster import LocalCluster
from training_runtime.render.slurm_conf import RenderError

TOPOLOGY_PROBLEM = "settings.topology: no switches; give at least one, or None for no TopologyPlugin"


def failing_up(error: Exception) -> Any:
    def up(*args: Any, **kwargs: Any) -> Any:
        raise error

    return up


def saved_traceback(line: str) -> Path:
    return Path(line.split("the traceback is in ")[1].split(";")[0])


def test_a_renderer_refusal_is_one_line_with_the_field_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(LocalCluster, "up", failing_up(RenderError("slurm.conf", [TOPOLOGY_PROBLEM])))
    assert cli.main(["up", "--config", "cluster.yaml"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: hyperpod-local up failed unexpectedly: "), err
    assert f"cannot render slurm.conf: {TOPOLOGY_PROBLEM}." in err
    assert "--debug" in err and "Traceback" not in err
    saved = saved_traceback(err)
    try:
        assert "Traceback" in saved.read_text() and "RenderError" in saved.read_text()
    finally:
        saved.unlink()


def test_any_other_bug_is_one_line_naming_its_type(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(LocalCluster, "up", failing_up(KeyError("nodes")))
    assert cli.main(["up"], prog="hyperpod-cdk local") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "KeyError: 'nodes'. This is a bug in hyperpod-local" in err, err
    saved = saved_traceback(err)
    try:
        assert "KeyError" in saved.read_text()
    finally:
        saved.unlink()


@pytest.mark.parametrize("argv", [["--debug", "up"], ["up", "--debug"]])
def test_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    monkeypatch.setattr(LocalCluster, "up", failing_up(RenderError("slurm.conf", [TOPOLOGY_PROBLEM])))
    with pytest.raises(RenderError):
        cli.main(argv)


def test_an_expected_error_stays_a_plain_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hyperpod_local import LocalClusterError

    monkeypatch.setattr(LocalCluster, "up", failing_up(LocalClusterError("another local cluster uses the prefix")))
    assert cli.main(["up"]) == 1
    assert capsys.readouterr().err == "error: another local cluster uses the prefix\n"


def test_status_of_a_cluster_with_no_slurm_node_says_why_sinfo_is_empty(capsys: pytest.CaptureFixture[str]) -> None:
    report: dict[str, Any] = {
        "cluster": "zero",
        "mode": "api-driven",
        "platform": "hyperpod",
        "slurm": "24.11",
        "workdir": "/w",
        "shared": "/w/shared",
        "capped": {},
        "nodes": [],
        "sinfo": "",
    }
    cli._print_status(report)
    assert capsys.readouterr().out.splitlines()[-1] == "sinfo: (no Slurm node: every compute group is at 0)"
    cli._print_status({**report, "sinfo": "ip-10-0-0-11 idle\n"})
    assert capsys.readouterr().out.splitlines()[-2:] == ["sinfo: ", "ip-10-0-0-11 idle"]
