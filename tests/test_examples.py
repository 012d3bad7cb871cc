"""Every example synthesizes, lints clean with cfn-lint and matches its reviewed snapshots.

Per example, in tests/snapshots/:

* ``<example>.<stack>.json``: the template, normalised (asset hashes, bootstrap checks);
* ``<example>.parameters.json`` and ``<example>.users.json``: the parameters file and ``users.json`` each
  cluster's lifecycle upload carries, read from the cloud assembly (CloudFormation values appear as CDK's
  ``<<marker:…>>`` placeholders). The template snapshot cannot see these: the upload names them by hash.

And in tests/golden/, ``<example>.slurm.conf`` (``<example>.<cluster>.slurm.conf`` for an example with
several clusters): the slurm.conf the runtime renders on the generic platform from that parameters file,
through the real step (``steps.slurm.rendered_files``) on a fake node, with every instance of every group
in the resource config.

After a reviewed change, regenerate them with ``UPDATE_SNAPSHOTS=1`` (snapshots) or ``UPDATE_GOLDEN=1``
(golden files), e.g. ``UPDATE_SNAPSHOTS=1 UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_examples.py``,
and review the diff. A missing file fails the test like a changed one (tests/reviewed_files.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cfn_parameters import resolved
from example_builds import ExampleBuild, ExampleBuilds, LintOnce
from reviewed_files import check_reviewed
from runtime_fakes import fake_node
from support import CFN_LINT_IGNORED, EXAMPLES, fast_app, normalised
from training_runtime.params import ProvisioningParameters
from training_runtime.steps.slurm import conf_path, rendered_files

SNAPSHOTS = Path(__file__).parent / "snapshots"
GOLDEN = Path(__file__).parent / "golden"


class Example:
    """One example's synthesized templates and uploads (tests/example_builds.py, shared by the session), and the
    cfn-lint run on them (once a session, with the rules tests/test_cfnlint_rules.py reads)."""

    def __init__(self, build: ExampleBuild, lint: LintOnce) -> None:
        self.path = build.path
        self.templates = build.templates
        self.uploads = build.uploads
        self.lint = lint

    def instance_groups(self, cluster_name: str) -> list[dict[str, Any]]:
        """The cluster's ``InstanceGroups`` as the template gives them to HyperPod (at the parameters' defaults)."""
        for template in self.templates.values():
            for resource in resolved(template)["Resources"].values():
                properties = resource.get("Properties", {})
                if resource["Type"] == "AWS::SageMaker::Cluster" and properties["ClusterName"] == cluster_name:
                    groups: list[dict[str, Any]] = properties["InstanceGroups"]
                    return groups
        raise AssertionError(f"no AWS::SageMaker::Cluster named {cluster_name}")


@pytest.fixture(scope="module", params=EXAMPLES, ids=[e.name for e in EXAMPLES])
def example(request: pytest.FixtureRequest, example_builds: ExampleBuilds, example_lint: LintOnce) -> Example:
    return Example(example_builds[request.param.name], example_lint)


_check = check_reviewed  # a missing snapshot or golden file fails; UPDATE_SNAPSHOTS=1 / UPDATE_GOLDEN=1 write them


def _dump(data: Any) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def test_cfn_lint_finds_nothing(example: Example) -> None:
    for name, template in example.templates.items():
        assert example.lint.default(template) == [], name


def test_snapshot(example: Example) -> None:
    for name, template in example.templates.items():
        _check(SNAPSHOTS / f"{example.path.stem}.{name}.json", _dump(normalised(template)), "UPDATE_SNAPSHOTS")


def test_parameters_and_users_files_snapshot(example: Example) -> None:
    if not example.uploads:
        pytest.skip("this example has no cluster, so no lifecycle upload")
    parameters = {c: {"file_name": u["file_name"], "content": u["parameters"]} for c, u in example.uploads.items()}
    users = {c: u["users"] for c, u in example.uploads.items()}
    _check(SNAPSHOTS / f"{example.path.stem}.parameters.json", _dump(parameters), "UPDATE_SNAPSHOTS")
    _check(SNAPSHOTS / f"{example.path.stem}.users.json", _dump(users), "UPDATE_SNAPSHOTS")


def test_uploaded_parameters_are_what_the_node_reads(example: Example) -> None:
    for cluster, upload in example.uploads.items():
        params = ProvisioningParameters.from_json(upload["parameters"])
        assert params.cluster_name == cluster
        assert params.file_name == upload["file_name"]


def test_golden_slurm_conf(example: Example, tmp_path: Path) -> None:
    if not example.uploads:
        pytest.skip("this example has no cluster, so no lifecycle upload")
    for cluster, upload in sorted(example.uploads.items()):
        params = ProvisioningParameters.from_json(upload["parameters"])
        groups = example.instance_groups(cluster)
        instances = {
            group["InstanceGroupName"]: [
                (f"{group['InstanceGroupName']}-{n}", f"10.1.{index}.{10 + n}", *_own_type(group, n))
                for n in range(1, group["InstanceCount"] + 1)
            ]
            for index, group in enumerate(groups)
        }
        # As HyperPod writes them: a type the parameters file leaves open comes from here.
        types = {group["InstanceGroupName"]: group["InstanceType"] for group in groups if "InstanceType" in group}
        controller = next(g.name for g in params.groups if g.role == "controller")
        node = fake_node(
            tmp_path / cluster, instance=f"{controller}-1", instances=instances, params=params, instance_types=types
        )
        files = {path: content for path, content, _, _ in rendered_files(node)}
        suffix = "" if len(example.uploads) == 1 else f".{cluster}"
        _check(
            GOLDEN / f"{example.path.stem}{suffix}.slurm.conf", files[conf_path(node, "slurm.conf")], "UPDATE_GOLDEN"
        )


def _own_type(group: dict[str, Any], n: int) -> tuple[str, ...]:
    """A flexible group's instances take its types in turn (each instance's own ``InstanceType``)."""
    flexible = group.get("InstanceRequirements", {}).get("InstanceTypes")
    return (flexible[(n - 1) % len(flexible)],) if flexible else ()


def test_ignored_lint_checks_carry_reasons() -> None:
    assert all(reason.strip() for reason in CFN_LINT_IGNORED.values())


def test_plain_cfn_lint_finds_nothing_we_caused_on_the_default_template() -> None:
    """cfn-lint as a platform team runs it (no configuration, no ignores): every finding on the default template
    is one of CDK's own resources' (CFN_LINT_IGNORED), none of ours. A DependsOn that repeats a GetAtt (W3005) is
    dropped from our constructs, or skipped on exactly its resource with a reason (the file systems')."""
    import json

    from cfnlint.api import ManualArgs, lint

    from hyperpod_cdk import ClusterConfig, TrainingClusterStack
    from support import cdk_own, template_of

    template = template_of(TrainingClusterStack(fast_app(), "hyperpod-ml-cluster", config=ClusterConfig()))
    matches = lint(json.dumps(template), config=ManualArgs(regions=["us-east-1"]))
    ours = [f"{m.rule.id} {'/'.join(map(str, m.path))}" for m in matches if not cdk_own(m.rule.id, m.path)]
    assert ours == []
    skipped = {k for k, r in template["Resources"].items() if "cfn-lint" in r.get("Metadata", {})}
    assert {template["Resources"][k]["Type"] for k in skipped} == {"AWS::FSx::FileSystem"}


def test_examples_cover_the_required_shapes() -> None:
    names = {e.name for e in EXAMPLES}
    assert {
        "trn1-cluster.yaml",
        "cpu-cluster.yaml",
        "gpu-cluster.yaml",
        "existing-vpc-fsx.yaml",
        "spot-research-cluster.yaml",
        "production-cluster.yaml",
        "shared_filesystem.py",
        "embed_construct.py",
        "service_catalog.py",
    } <= names
