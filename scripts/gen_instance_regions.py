#!/usr/bin/env python3
"""Write ``src/hyperpod_cdk/data/instance_types_by_region.json``: the instance types HyperPod offers in each Region.

Two sources, both installed with hyperpod-cdk's tools, so the file is reproducible offline:

- cfn-lint's schema bundle: its per-Region enum of ``AWS::SageMaker::Cluster`` ``InstanceGroups[].InstanceType``
  (``cfnlint/data/schemas/extensions/aws_sagemaker_cluster/instancetype_enum.json``, which cfn-lint builds from
  AWS's price list);
- botocore's SageMaker model: the ``ClusterInstanceType`` enum, whose types that no Region lists yet are kept apart
  (``api_only``: the API accepts them, their Regions are unknown).

AWS's HyperPod landing page lists fewer Regions than the price list (``training_runtime.hyperpod_facts.
HYPERPOD_REGIONS``): the file keeps what the price list says, and GRP-REGION-UNLISTED warns where the two disagree::

    .venv/bin/python scripts/gen_instance_regions.py          # rewrite the file
    .venv/bin/python scripts/gen_instance_regions.py --check  # exit 1 if the committed file is stale

tests/test_instance_facts.py fails while the committed file's Regions or types differ from the sources'.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "hyperpod_cdk" / "data" / "instance_types_by_region.json"
ENUM = "data/schemas/extensions/aws_sagemaker_cluster/instancetype_enum.json"


def document() -> dict[str, Any]:
    """The file's content from the installed cfn-lint and botocore."""
    import botocore
    import botocore.session
    import cfnlint.version

    bundle = json.loads(resources.files("cfnlint").joinpath(ENUM).read_text())
    regions = {r: sorted(v["enum"]) for r, v in bundle.items() if isinstance(v, dict) and "enum" in v}
    listed = {t for types in regions.values() for t in types}
    model = botocore.session.get_session().get_service_model("sagemaker")
    api_only = sorted(set(model.shape_for("ClusterInstanceType").enum) - listed)
    return {
        "api_only": api_only,
        "api_only_source": f"botocore {botocore.__version__} ClusterInstanceType enum: types the API accepts that the "
        "CloudFormation schema lists in no Region yet",
        "regions": dict(sorted(regions.items())),
        "source": f"cfn-lint {cfnlint.version.__version__} schema bundle: AWS::SageMaker::Cluster "
        "InstanceGroups[].InstanceType enum per Region",
    }


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=0, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    args = parser.parse_args(argv)
    text = render(document())
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run scripts/gen_instance_regions.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
