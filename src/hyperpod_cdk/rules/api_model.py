"""API-MODEL: the CreateCluster request a config produces, against the SageMaker API model's constraints.

The request is :func:`hyperpod_cdk.core.api_request.cluster_request` of the view; the constraints are the generated
table of :mod:`hyperpod_cdk.aws_data.api_constraints` (botocore's ``service-2.json``, with the CloudFormation
schema's where
that is stricter). Every violation is reported at once, at the config field the member comes from. A construct runs
it on its props too (synth), with CDK tokens skipped.
"""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.aws_data.api_constraints import check_request, table
from hyperpod_cdk.core.api_request import cluster_request, config_field, is_unknown
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import Problem

API_MODEL_SOURCE = (
    "botocore's SageMaker service model (service-2.json: CreateCluster's request shapes), from which "
    "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateCluster.html is generated; the "
    "CloudFormation schema of AWS::SageMaker::Cluster where it is stricter"
)


@REGISTRY.rule("API-MODEL", "cluster", "instance_groups[*]", needs=("instance_groups",), source=API_MODEL_SOURCE)
def api_model(view: ClusterView) -> Iterator[Problem]:
    """The cluster's CreateCluster request meets every constraint of the SageMaker API model (required members,
    enums, ranges, lengths, patterns) and of the CloudFormation schema where stricter."""

    def unknown(value: object) -> bool:
        # Only a scalar can be a CDK token; a structure may hold UNKNOWN, which the CDK could not take.
        return is_unknown(value) or (isinstance(value, str | int | float) and view.is_unresolved(value))

    for violation in check_request(cluster_request(view), "CreateCluster", unknown=unknown):
        yield Problem(
            config_field(view, violation.path),
            f"the API rejects {violation.path}: allowed: {violation.allowed} ({violation.source})",
            got=violation.value,
            fix=f"give a value the SageMaker API accepts (botocore {table()['botocore']} is the model checked)",
        )


DISAGREEMENT_HEADER = """
## The SageMaker API model and the CloudFormation schema

`API-MODEL` (and cfn-lint rule `E9200`) hold the cluster's request against the constraints of botocore {botocore}'s
SageMaker model (`service-2.json`) on every member hyperpod-cdk emits, from the generated table
`src/hyperpod_cdk/data/api_constraints.json` (`scripts/gen_api_constraints.py`). Where CloudFormation's schema of
`AWS::SageMaker::Cluster` ({cfn_schema}) says otherwise, the stricter one applies (a template passes through both);
two different patterns both apply. The emulated control plane applies the API model's alone, as the API does.
Patterns are matched against the whole value, and `\\p{{L}}`/`\\p{{N}}` are read as Python's `\\w`, `\\p{{Z}}` as `\\s`:
neither source says more.

| member | facet | API model | CloudFormation schema | applied |
|---|---|---|---|---|
"""


def _cell(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return "<br>".join(f"`{v}`" for v in value)
    return f"`{value}`"


def disagreement_reference() -> str:
    """docs/rules.md's table of where the API model and the CloudFormation schema disagree."""
    meta = table()
    rows = [
        "| `{}` | {} | {} | {} | {} |".format(
            row["path"], row["facet"], *(_cell(row[k]).replace("|", "\\|") for k in ("api", "cfn", "applied"))
        )
        for row in meta["disagreements"]
    ]
    header = DISAGREEMENT_HEADER.format(botocore=meta["botocore"], cfn_schema=meta["cfn_schema"])
    return header + "\n".join(rows) + "\n"
