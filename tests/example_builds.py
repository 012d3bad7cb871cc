"""Every example synthesized once per test process, with cfn-lint run once per template.

tests/test_examples.py (snapshots, golden files, cfn-lint), tests/test_scanners.py (checkov) and
tests/test_cfnlint_rules.py (our rules) read the same templates; each synthesis costs seconds of CPU in jsii's node
process, and each cfn-lint run about one more, so they share the session fixtures ``example_builds`` and
``example_lint`` (tests/conftest.py), which only read what is built here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk import aws_servicecatalog as servicecatalog

from hyperpod_cdk import PublishedTrainingClusterStack, PublishTarget, SlurmMode, load_config
from support import EXAMPLES, build_example, cfn_lint, fast_app, uploaded_files

PLATFORM = PublishTarget("platform-templates", "hyperpod/")


def publishable(example: Path) -> bool:
    """A config example ``publish`` accepts: all but lifecycle-driven mode with a file system whose DNS name
    is known only at deploy (tests/test_publish_template.py checks that refusal)."""
    if example.suffix != ".yaml":
        return False
    config = load_config(example)
    storage = config.storage
    names_known = storage is None or (storage.existing is not None and storage.existing.dns_name is not None)
    return config.mode != SlurmMode.LIFECYCLE_DRIVEN or names_known


class ExampleBuild:
    """One example synthesized into a cloud assembly in ``outdir``, in one synth: its stacks as ``cdk deploy``
    takes them (``templates``, by stack name), the template ``hyperpod-cdk publish`` builds from a config example
    (``published``, None where :func:`publishable` says no), each Service Catalog product's template
    (``products``, by product stack name), and what each cluster's lifecycle upload carries (``uploads``)."""

    def __init__(self, path: Path, outdir: Path) -> None:
        self.path = path
        app = fast_app(outdir=str(outdir))
        stacks = build_example(path, app)
        published = (
            PublishedTrainingClusterStack(app, "published", config=load_config(path), target=PLATFORM)
            if publishable(path)
            else None
        )
        assembly = app.synth()
        self.templates: dict[str, dict[str, Any]] = {
            s.stack_name: assembly.get_stack_artifact(s.artifact_id).template for s in stacks
        }
        self.published = assembly.get_stack_artifact(published.artifact_id).template if published else None
        self.products: dict[str, dict[str, Any]] = {
            product.stack_name: json.loads((outdir / f"{product.artifact_id}.product.template.json").read_text())
            for stack in [*stacks, *filter(None, [published])]
            for product in stack.node.find_all()
            if isinstance(product, servicecatalog.ProductStack)
        }
        self.uploads: dict[str, dict[str, Any]] = {}
        for template in self.templates.values():
            self.uploads.update(uploaded_files(outdir, template))

    def template_files(self) -> dict[str, dict[str, Any]]:
        """Every template of the example by the file name the scanners read it from."""
        stem = self.path.stem
        files = {f"{stem}-{name}.template.json": t for name, t in self.templates.items()}
        if self.published is not None:
            files[f"{stem}-published.template.json"] = self.published
        files.update({f"{stem}-{name}.product.template.json": t for name, t in self.products.items()})
        return files


class ExampleBuilds:
    """Each example's :class:`ExampleBuild` by file name (``gpu-cluster.yaml``), synthesized the first time a test
    asks for it and kept (so ``pytest -k gpu-cluster`` synthesizes that example alone)."""

    def __init__(self, tmp_path: Path) -> None:
        self._tmp_path = tmp_path
        self._built: dict[str, ExampleBuild] = {}

    def __getitem__(self, name: str) -> ExampleBuild:
        if name not in self._built:
            (path,) = [example for example in EXAMPLES if example.name == name]
            self._built[name] = ExampleBuild(path, self._tmp_path / path.stem)
        return self._built[name]

    def all(self) -> list[ExampleBuild]:
        return [self[example.name] for example in EXAMPLES]


class LintOnce:
    """cfn-lint with our rules appended and the informational checks included (``support.cfn_lint(include=["I"])``),
    run once per distinct template and kept: :meth:`default` is what plain ``cfn_lint`` finds (the informational
    findings, rule IDs ``I…``, left out), :meth:`all` everything."""

    def __init__(self) -> None:
        self._found: dict[str, list[str]] = {}

    def all(self, template: dict[str, Any]) -> list[str]:
        key = json.dumps(template, sort_keys=True)
        if key not in self._found:
            self._found[key] = cfn_lint(template, include=["I"])
        return list(self._found[key])

    def default(self, template: dict[str, Any]) -> list[str]:
        return [f for f in self.all(template) if not f.startswith("I")]
