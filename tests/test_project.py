"""``hyperpod-cdk init DIR`` writes a project ``cdk synth`` accepts as it is (tests/test_package.py synthesizes
one from an installed wheel with the pinned CDK CLI): here, what goes into it."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from hyperpod_cdk.cli import main
from hyperpod_cdk.config import json_schema, load_config
from hyperpod_cdk.project import SCHEMA_FILE, ProjectError, init_project

ROOT = Path(__file__).resolve().parent.parent
PINNED_CLI_FLAGS = ROOT / "node_modules" / "aws-cdk" / "lib" / "init-templates" / ".recommended-feature-flags.json"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("init") / "new-project"
    assert main(["init", str(directory)]) == 0
    return directory


def test_cdk_json_has_the_flags_the_pinned_cli_writes(project: Path) -> None:
    """The copy in the package is the pinned CLI's own (`make docs` refreshes it when package.json moves)."""
    cdk = json.loads((project / "cdk.json").read_text())
    assert cdk["app"] == "python3 app.py"
    assert cdk["context"] == json.loads(PINNED_CLI_FLAGS.read_text())
    assert len(cdk["context"]) > 50


def test_cluster_yaml_is_valid_and_names_its_schema(project: Path) -> None:
    text = (project / "cluster.yaml").read_text()
    assert f"# yaml-language-server: $schema=./{SCHEMA_FILE}\n" in text
    assert json.loads((project / SCHEMA_FILE).read_text()) == json_schema()
    config = load_config(project / "cluster.yaml")
    assert config.check("cluster.yaml") == []  # no warnings either
    assert yaml.safe_load(text)["cluster_name"] == config.cluster_name


def test_requirements_pin_what_is_installed(project: Path) -> None:
    lines = (project / "requirements.txt").read_text().splitlines()
    assert lines == [f"{name}=={metadata.version(name)}" for name in ("hyperpod-cdk", "aws-cdk-lib", "constructs")]


def test_app_reads_cluster_yaml_and_silences_the_banner_before_cdk(project: Path) -> None:
    app = (project / "app.py").read_text()
    compile(app, "app.py", "exec")
    assert app.index("silence_node_end_of_life_banner()") < app.index("import aws_cdk")
    assert '"cluster.yaml"' in app
    assert {p.name for p in project.iterdir()} == {
        "app.py",
        "cdk.json",
        "cluster.yaml",
        SCHEMA_FILE,
        "requirements.txt",
        "README.md",
        ".gitignore",
    }


def test_an_existing_project_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "app.py").write_text("mine")
    assert main(["init", str(tmp_path)]) == 1
    assert "is not an empty directory" in capsys.readouterr().err
    assert (tmp_path / "app.py").read_text() == "mine"
    with pytest.raises(ProjectError):
        init_project(tmp_path / "app.py")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert init_project(empty)
