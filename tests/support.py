"""Shared test helpers: building the examples and checking templates."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from hyperpod_cdk import TrainingClusterStack, load_config
from hyperpod_cdk.core.deployment import deployment
from training_runtime.params import PARAMETERS_FILE_BY_MODE
from training_runtime.users import USERS_FILE

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("examples/*.py")])
STRICT_VALIDATION = {
    "@aws-cdk/core:validateAgainstDefaultRules": True,
    "@aws-cdk/core:strictCfnValidateErrors": True,
}
CFN_LINT_IGNORED: dict[tuple[str, str], str] = {
    ("W3005", "CustomCDKBucketDeployment"): "CDK's BucketDeployment handler (a singleton Lambda function) declares "
    "a DependsOn on its service role, which its Role GetAtt already implies",
    ("W3005", "CustomVpcRestrictDefaultSGCustomResourceProvider"): "CDK's custom resource provider that closes the "
    "VPC's default security group declares a DependsOn on its role, which its Role GetAtt already implies",
}
"""cfn-lint findings we ignore: (rule, logical ID prefix of the resources it is ignored on) -> why. Only CDK's own
resources: what our constructs cause is fixed, or skipped in the resource's own ``cfn-lint`` metadata with its
reason in the code (``hyperpod_cdk.constructs.nag.lint_accepts``), so plain cfn-lint sees the same."""


def cdk_own(rule: str, path: Sequence[object]) -> bool:
    """Whether a finding of ``rule`` at ``path`` is one :data:`CFN_LINT_IGNORED` ignores."""
    return (
        len(path) > 1
        and path[0] == "Resources"
        and any(rule == ignored and str(path[1]).startswith(prefix) for ignored, prefix in CFN_LINT_IGNORED)
    )


def fast_app(**kwargs: Any) -> cdk.App:
    """An App with CDK's built-in template validator off (it costs ~5 s per synth)."""
    return cdk.App(builtin_cloud_formation_validation=False, **kwargs)


def build_example(path: Path, app: cdk.App) -> list[cdk.Stack]:
    """Build one example: a YAML config through TrainingClusterStack, or a Python app's ``build(app)``."""
    if path.suffix == ".yaml":
        config = load_config(path)
        return [TrainingClusterStack(app, deployment(config).stack_name, config=config)]
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    build: Callable[[cdk.App], list[cdk.Stack]] = module.build
    return build(app)


def template_of(stack: cdk.Stack) -> dict[str, Any]:
    return cdk.assertions.Template.from_stack(stack).to_json()


HYPERPOD_CFN_LINT_RULES = "hyperpod_cdk.cfnlint_rules"
"""Our cfn-lint rules (the HyperPod API's constraints on Slurm), appended as ``cfn-lint --append-rules`` does."""


def cfn_lint(template: dict[str, Any], include: Sequence[str] = ()) -> list[str]:
    """cfn-lint's findings with our rules appended; ``include`` adds checks left out by default (e.g. ``I``)."""
    from cfnlint.api import ManualArgs, lint

    matches = lint(
        json.dumps(template),
        config=ManualArgs(
            regions=["us-east-1", "us-west-2"],
            append_rules=[HYPERPOD_CFN_LINT_RULES],
            include_checks=list(include),
        ),
    )
    found = [m for m in matches if not cdk_own(m.rule.id, m.path)]
    return [f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})" for m in found]


_ASSET_HASH = re.compile(r"[0-9a-f]{64}")
_MARKER = re.compile(r"<<marker:0x[0-9a-f]+:[0-9]+>>")


def normalised(template: dict[str, Any]) -> dict[str, Any]:
    """The template without what churns on every CDK or asset change (hashes, bootstrap checks)."""
    template = json.loads(json.dumps(template))
    template.get("Parameters", {}).pop("BootstrapVersion", None)
    template.get("Rules", {}).pop("CheckBootstrapVersion", None)
    return json.loads(_ASSET_HASH.sub("<asset-hash>", json.dumps(template, sort_keys=True)))


def validation_report(outdir: Path) -> list[str]:
    """Findings in CDK's validation report (cdk-nag and the built-in validator), one line each."""
    report_path = outdir / "validation-report.json"
    if not report_path.exists():
        return []
    report = json.loads(report_path.read_text())
    return [
        f"{plugin.get('pluginName', plugin.get('summary', {}).get('pluginName'))}: {v['ruleName']} @ "
        f"{c.get('constructPath')} ({v.get('description', '')[:160]})"
        for plugin in report.get("pluginReports", [])
        for v in plugin.get("violations", [])
        for c in v.get("violatingConstructs", [])
    ]


def assert_nag_clean(app: cdk.App, outdir: Path) -> None:
    """Synthesize ``app`` (written to ``outdir``) with cdk-nag's AwsSolutions checks and whatever validation its
    context turns on; fail with the report's findings, one a line, if there is any."""
    import pytest
    from cdk_nag import AwsSolutionsChecks

    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
    except RuntimeError as error:  # ValidationFailed: the report says why
        pytest.fail(f"{error}\n" + "\n".join(validation_report(outdir)))
    assert validation_report(outdir) == []


def uploaded_files(outdir: Path, template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What each lifecycle upload of a synthesized template puts next to the scripts, per cluster name:
    ``{"file_name": ..., "parameters": <parameters file>, "users": <users.json or None>}``.

    Read from the cloud assembly in ``outdir`` (the assets each ``BucketDeployment`` names in its
    ``SourceObjectKeys``), so it is what would be uploaded. A CloudFormation value stands in the file as
    CDK's placeholder ``<<marker:0xbaba:N>>`` (deterministic), which the upload replaces with the quoted
    value; here it is read as the string ``"<<marker:0xbaba:N>>"``, except a secret's ARN (a ``Ref`` to an
    ``AWS::SecretsManager::Secret``), which reads as a secret's ARN: the node checks that form (the REST API's key).
    """
    uploads: dict[str, dict[str, Any]] = {}
    for resource in template["Resources"].values():
        if resource["Type"] != "Custom::CDKBucketDeployment":
            continue
        files: dict[str, str] = {}
        for key in resource["Properties"]["SourceObjectKeys"]:
            directory = outdir / f"asset.{key.removesuffix('.zip')}"
            for path in directory.iterdir() if directory.is_dir() else ():
                if path.is_file():
                    files[path.name] = path.read_text()
        names = [n for n in files if n in PARAMETERS_FILE_BY_MODE.values()]
        if not names:
            continue
        (file_name,) = names
        stand_ins = _secret_stand_ins(resource["Properties"].get("SourceMarkers") or [], template)
        parameters = json.loads(
            _MARKER.sub(lambda m, found=stand_ins: json.dumps(found.get(m[0], m[0])), files[file_name])  # type: ignore[misc]
        )
        users = files.get(USERS_FILE)
        uploads[parameters["hyperpod_cdk"]["cluster_name"]] = {
            "file_name": file_name,
            "parameters": parameters,
            "users": json.loads(users) if users is not None else None,
        }
    return uploads


def _secret_stand_ins(markers: list[dict[str, Any]], template: dict[str, Any]) -> dict[str, str]:
    """Each marker that stands for a secret's ARN (``"`` + ``Ref`` of a secret + ``"``), and a secret's ARN for it."""
    found = {}
    for source in markers:
        for marker, value in source.items():
            parts = value.get("Fn::Join", ["", []])[1] if isinstance(value, dict) else []
            refs = [p["Ref"] for p in parts if isinstance(p, dict) and "Ref" in p]
            kinds = [template["Resources"].get(r, {}).get("Type") for r in refs]
            if len(parts) == 3 and kinds == ["AWS::SecretsManager::Secret"]:
                found[marker] = f"arn:aws:secretsmanager:us-west-2:111122223333:secret:{refs[0]}-AbCdEf"
    return found


def synth_bundled_app(config: Path, stack: str, outdir: Path, **context: str) -> dict[str, Any]:
    """``stack``'s template from the bundled app (app.py) run as ``cdk deploy`` runs it: a process of its own with
    the config and ``context`` in ``CDK_CONTEXT_JSON``, in ``config``'s directory (the project's, where the app
    records its look-ups of the deployed cluster in cdk.context.json)."""
    env = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps({"config": str(config), **context}),
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    run = subprocess.run(
        [sys.executable, str(ROOT / "app.py")], env=env, capture_output=True, text=True, cwd=config.parent
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads((outdir / f"{stack}.template.json").read_text())  # type: ignore[no-any-return]
