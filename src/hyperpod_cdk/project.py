"""``hyperpod-cdk init DIR``: a new CDK app project that deploys one cluster, which ``cdk synth`` accepts as it is.

The project: ``app.py`` (a ``TrainingClusterStack`` from ``cluster.yaml``), ``cluster.yaml`` and its JSON Schema
(``cluster-config.schema.json``, the one ``hyperpod-cdk schema`` prints, named in the file's
``yaml-language-server`` comment), ``cdk.json`` with the CDK feature flags the pinned CDK CLI's own ``cdk init``
writes (``data/recommended-feature-flags.json``, copied from it by ``make docs``), ``requirements.txt`` pinning
hyperpod-cdk, aws-cdk-lib and constructs at the versions installed here, ``package.json`` and
``package-lock.json`` pinning the CDK CLI to the version this repository pins (``data/cdk-cli-lock.json``, the
repository's ``package-lock.json`` copied by ``make docs``; npm's ``latest`` aws-cdk does not work with
aws-cdk-lib 2.x, docs/deploying.md), a README and a ``.gitignore``.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata, resources
from pathlib import Path
from typing import Any

TEMPLATE = "project_template"
PINNED = ("hyperpod-cdk", "aws-cdk-lib", "constructs")
"""The distributions ``requirements.txt`` pins (their dependencies follow from them)."""
SCHEMA_FILE = "cluster-config.schema.json"
CLI_LOCK = "cdk-cli-lock.json"
"""The repository's ``package-lock.json``, packaged (``make docs`` copies it; tests/test_project.py fails when the
copy is stale): the one pin of the CDK CLI, for this checkout and for every project ``init`` writes."""
CLI_PACKAGE = "aws-cdk"


class ProjectError(Exception):
    """The directory cannot take a new project."""


def recommended_feature_flags() -> dict[str, object]:
    """The feature flags ``cdk init`` of the pinned CDK CLI writes into a new project's ``cdk.json``."""
    text = resources.files("hyperpod_cdk").joinpath("data", "recommended-feature-flags.json").read_text()
    flags: dict[str, object] = json.loads(text)
    return flags


def cdk_cli_lock() -> dict[str, Any]:
    """The packaged copy of the repository's ``package-lock.json`` (:data:`CLI_LOCK`)."""
    lock: dict[str, Any] = json.loads(resources.files("hyperpod_cdk").joinpath("data", CLI_LOCK).read_text())
    return lock


def cdk_cli_version() -> str:
    """The CDK CLI version this repository pins (and every ``init`` project with it)."""
    return str(cdk_cli_lock()["packages"]["node_modules/" + CLI_PACKAGE]["version"])


def npm_files() -> dict[str, str]:
    """``package.json`` and ``package-lock.json`` of a new project: the repository's pin of the CDK CLI, so
    ``npm ci`` installs exactly that CLI and ``npx --no-install cdk`` runs it."""
    lock = cdk_cli_lock()
    root = lock["packages"][""]
    package = {
        "name": root["name"],
        "private": True,
        "description": "Pins the AWS CDK CLI of this app: npm ci, then npx --no-install cdk synth|deploy.",
        "devDependencies": root["devDependencies"],
    }
    return {
        "package.json": json.dumps(package, indent=2) + "\n",
        "package-lock.json": json.dumps(lock, indent=2) + "\n",
    }


def requirements() -> str:
    """``requirements.txt``: exact versions of :data:`PINNED` as installed in this environment."""
    return "".join(f"{name}=={metadata.version(name)}\n" for name in PINNED)


def project_files() -> dict[str, str]:
    """Every file of a new project: its name in the project, its text."""
    from hyperpod_cdk.core.config import json_schema

    template = resources.files("hyperpod_cdk").joinpath(TEMPLATE)
    cdk_json = {
        "app": "python3 app.py",  # as `cdk init app --language python` writes it
        "watch": {"include": ["app.py", "cluster.yaml"]},
        "context": recommended_feature_flags(),
    }
    return {
        "app.py": template.joinpath("app.py.template").read_text(),
        "cluster.yaml": template.joinpath("cluster.yaml").read_text(),
        SCHEMA_FILE: json.dumps(json_schema(), indent=2, sort_keys=True) + "\n",
        "cdk.json": json.dumps(cdk_json, indent=2) + "\n",
        "requirements.txt": requirements(),
        **npm_files(),
        "README.md": template.joinpath("README.md").read_text(),
        ".gitignore": template.joinpath("gitignore").read_text(),
    }


def init_project(directory: Path) -> list[Path]:
    """Write a new project into ``directory`` (created; if it exists it must be empty); the files written."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise ProjectError(f"{directory} exists and is not an empty directory: give a new or empty one")
    files = project_files()
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written


def init_command(directory: str) -> int:
    """``hyperpod-cdk init DIR``: 0 when the project is written, 1 when the directory cannot take it."""
    try:
        init_project(Path(directory))
    except ProjectError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(
        f"A new CDK app in {directory}: edit cluster.yaml, then\n"
        f"  cd {directory} && python3 -m venv .venv && . .venv/bin/activate && pip install -r requirements.txt\n"
        f"  npm ci && npx --no-install cdk synth   (the CDK CLI {cdk_cli_version()}, pinned in package.json)"
    )
    return 0
