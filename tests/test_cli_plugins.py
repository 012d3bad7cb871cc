"""The command line loads only what a command needs: ``--help`` and ``validate`` import nothing of the emulator
(hyperpod-local plugs ``local`` in through an entry point, looked up only when ``local`` runs), ``--help`` not
even pydantic, and neither aws_cdk nor jsii. Importing the library leaves the environment alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hyperpod_cdk.cli import KNOWN_PLUGINS, PLUGIN_GROUP, main

ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import json, sys
from hyperpod_cdk.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def loaded_by(*args: str) -> set[str]:
    """The top-level packages (and importlib.metadata, which scans every distribution) a fresh interpreter holds
    after running ``hyperpod-cdk ARGS``; the emulator is on its path (as `make setup` installs it), so leaving it
    out is the CLI's doing."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT / "hyperpod-local" / "src")]))
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    report = json.loads(result.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None), result.stderr
    modules: list[str] = report["modules"]
    return {name.split(".")[0] for name in modules} | {name for name in modules if name == "importlib.metadata"}


def test_help_imports_no_emulator_no_pydantic_no_cdk() -> None:
    loaded = loaded_by("--help")
    assert "hyperpod_cdk" in loaded
    assert not loaded & {"hyperpod_local", "pydantic", "aws_cdk", "jsii", "yaml", "importlib.metadata"}, loaded


def test_validate_imports_no_emulator_and_no_cdk() -> None:
    loaded = loaded_by("validate", str(ROOT / "examples" / "trn1-cluster.yaml"))
    assert "pydantic" in loaded  # it did validate
    assert not loaded & {"hyperpod_local", "aws_cdk", "jsii"}, loaded


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"hyperpod-cdk {version('hyperpod-cdk')}\n"


def test_a_plugin_command_gets_the_rest_of_the_command_line() -> None:
    calls: list[tuple[str, list[str]]] = []

    def plugins(name: str) -> object:
        def plugin(argv: list[str]) -> int:
            calls.append((name, argv))
            return 7

        return plugin

    assert main(["local", "up", "--config", "c.yaml", "--help"], plugins=plugins) == 7  # type: ignore[arg-type]
    assert calls == [("local", ["up", "--config", "c.yaml", "--help"])]


def test_a_builtin_command_never_looks_plugins_up(tmp_path: Path) -> None:
    def plugins(name: str) -> None:
        raise AssertionError(f"looked up {name}")

    assert main(["init", str(tmp_path / "p")], plugins=plugins) == 0


def test_local_without_its_package_says_how_to_install_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["local", "up"], plugins=lambda name: None) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: the local cluster is the hyperpod-local package: pip install hyperpod-local")
    assert KNOWN_PLUGINS["local"][1] in error


def test_an_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["vaildate", "c.yaml"], plugins=lambda name: None)
    assert done.value.code == 2
    assert "invalid choice: 'vaildate'" in capsys.readouterr().err


def test_the_emulator_declares_its_entry_point() -> None:
    """What the installed metadata will carry (tests/test_package.py runs it from an installed wheel)."""
    import tomllib

    declared = tomllib.loads((ROOT / "hyperpod-local" / "pyproject.toml").read_text())["project"]["entry-points"]
    target = declared[PLUGIN_GROUP]["local"]
    module, _, function = target.partition(":")
    assert module == "hyperpod_local.cli" and callable(getattr(__import__(module, fromlist=["x"]), function))


def test_importing_the_library_changes_no_environment_variable() -> None:
    env = {k: v for k, v in os.environ.items() if k != "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"}
    env["PYTHONPATH"] = str(ROOT / "src")
    probe = (
        "import os; before = dict(os.environ); import hyperpod_cdk, hyperpod_cdk.constructs; "
        "print(sorted(set(os.environ.items()) ^ set(before.items())))"
    )
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_banner_variable_keeps_what_the_user_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_cdk.core.node_banner import VARIABLE, silence_node_end_of_life_banner

    monkeypatch.setenv(VARIABLE, "18")
    silence_node_end_of_life_banner()
    silence_node_end_of_life_banner()
    assert os.environ[VARIABLE] == "18,20"
    monkeypatch.delenv(VARIABLE)
    silence_node_end_of_life_banner()
    assert os.environ[VARIABLE] == "20"


def test_help_wraps_as_argparse_would(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI tells argparse the width itself (sparing argparse's shutil import); the text is argparse's."""
    import argparse

    from hyperpod_cdk import cli

    def help_text(columns: str) -> str:
        monkeypatch.setenv("COLUMNS", columns)
        with pytest.raises(SystemExit):
            main(["--help"])
        return capsys.readouterr().out

    ours = {columns: help_text(columns) for columns in ("60", "132", "")}
    monkeypatch.setattr(cli, "_HelpFormatter", argparse.HelpFormatter)
    assert ours == {columns: help_text(columns) for columns in ours}
    assert ours["60"] != ours["132"] and ours[""] not in (ours["60"], ours["132"])  # the width is used


STOP_AT_CDK = """
import os, runpy, sys

class StopAtCdk:
    def find_spec(self, name, path=None, target=None):
        if name == "aws_cdk":
            print("AT_CDK=" + os.environ.get("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "<unset>"))
            sys.exit(0)
        return None

sys.meta_path.insert(0, StopAtCdk())
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def banner_variable_when_cdk_loads(app: Path) -> str:
    """Run ``app`` until it imports aws_cdk (jsii starts Node.js then): the banner variable at that moment."""
    env = {k: v for k, v in os.environ.items() if k != "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"}
    env["PYTHONPATH"] = str(ROOT / "src")
    result = subprocess.run(
        [sys.executable, "-c", STOP_AT_CDK, str(app)], cwd=app.parent, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_the_bundled_app_silences_the_banner_before_cdk_loads() -> None:
    assert banner_variable_when_cdk_loads(ROOT / "app.py") == "AT_CDK=20"


def test_an_init_projects_app_silences_the_banner_before_cdk_loads(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path / "project")]) == 0
    assert banner_variable_when_cdk_loads(tmp_path / "project" / "app.py") == "AT_CDK=20"
