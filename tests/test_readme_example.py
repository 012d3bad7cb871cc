"""The README's embedding example is real code: its Python block synthesizes, as written, into a stack with the
network, the file system linked to the existing bucket and the cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SECTION = "### 2. Embed single constructs in your own stacks"


def readme_example() -> str:
    section = (ROOT / "README.md").read_text().split(SECTION + "\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1, "the embedding section has one Python block"
    return str(blocks[0])


@pytest.mark.slow  # 5 s or more: make test, not make test-fast
def test_the_readme_embedding_example_synthesizes(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(readme_example())
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path / "out"), "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    template = json.loads((tmp_path / "out" / "my-training.template.json").read_text())
    types = [resource["Type"] for resource in template["Resources"].values()]
    assert types.count("AWS::SageMaker::Cluster") == 1
    assert types.count("AWS::FSx::FileSystem") == 1
    (association,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::FSx::DataRepositoryAssociation"]
    assert association["Properties"]["FileSystemPath"] == "/datasets"
    assert "my-datasets-bucket" in json.dumps(association["Properties"]["DataRepositoryPath"])
    (cluster,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Cluster"]
    groups = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    assert groups["p5"]["InstanceType"] == "ml.p5.48xlarge" and groups["p5"]["InstanceCount"] == 4
    assert "ClusterArn" in template["Outputs"]


def test_the_readme_validation_example_reports_exactly_the_problems_it_shows(tmp_path: Path) -> None:
    section = (ROOT / "README.md").read_text().split("## Validation\n", 1)[1].split("\n## ", 1)[0]
    config = re.search(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    shown = re.search(r"```\n(error: .*?)```", section, flags=re.DOTALL)
    assert config and shown
    problems = [line[4:] for line in shown.group(1).splitlines() if line.startswith("  - ")]
    assert re.match(rf"error: /tmp/bad-cluster.yaml: {len(problems)} problems$", shown.group(1).splitlines()[0])
    path = tmp_path / "bad-cluster.yaml"
    path.write_text(config.group(1))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run(
        [sys.executable, "-m", "hyperpod_cdk.cli", "validate", str(path)], env=env, capture_output=True, text=True
    )
    assert run.returncode == 1
    errors = [line.split(": error: ", 1)[1] for line in (run.stdout + run.stderr).splitlines() if ": error: " in line]
    assert errors == problems
