"""``hyperpod-cdk init DIR`` writes a project ``cdk synth`` accepts as it is (tests/test_package.py synthesizes
one from an installed wheel with the pinned CDK CLI): here, what goes into it."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from hyperpod_cdk.cli import main
from hyperpod_cdk.core.config import json_schema, load_config
from hyperpod_cdk.project import CLI_LOCK, SCHEMA_FILE, ProjectError, cdk_cli_version, init_project

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


def test_the_cdk_cli_is_pinned_to_the_repositorys_version(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One pin of the CDK CLI: the repository's package.json, its lock, the packaged copy and every new project."""
    pinned = json.loads((ROOT / "package.json").read_text())["devDependencies"]
    assert (
        json.loads((project / "package.json").read_text())["devDependencies"]
        == pinned
        == {"aws-cdk": cdk_cli_version()}
    )
    # The project's lock is the repository's, byte for byte (npm ci installs exactly that CLI, its integrity checked);
    # the packaged copy is current (`make docs` copies it).
    assert (project / "package-lock.json").read_text() == (ROOT / "package-lock.json").read_text()
    assert (ROOT / "src" / "hyperpod_cdk" / "data" / CLI_LOCK).read_text() == (ROOT / "package-lock.json").read_text()
    lock = json.loads((project / "package-lock.json").read_text())
    assert lock["packages"][""]["devDependencies"] == pinned
    assert lock["packages"]["node_modules/aws-cdk"]["version"] == pinned["aws-cdk"]
    # What the user is told: npm ci and the pinned CLI through npx, never a global install.
    readme = (project / "README.md").read_text()
    assert "npm ci" in readme and "npx --no-install cdk synth" in readme and "npx --no-install cdk deploy" in readme
    assert "node_modules" in (project / ".gitignore").read_text().split()
    assert main(["init", str(project.parent / "told")]) == 0
    told = capsys.readouterr().out
    assert "npm ci && npx --no-install cdk synth" in told and pinned["aws-cdk"] in told
    for text in (readme, told):
        assert "install -g" not in text and "\n    cdk " not in text


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
        "package.json",
        "package-lock.json",
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
