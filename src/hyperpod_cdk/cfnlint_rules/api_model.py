"""cfn-lint rule E9200: every literal value of an ``AWS::SageMaker::Cluster`` against the SageMaker API model.

The same table and checker as ``validate`` (:mod:`hyperpod_cdk.aws_data.api_constraints`): required members, enums,
ranges,
lengths and patterns of botocore's ``service-2.json``, with the CloudFormation schema's where that is stricter. A
value cfn-lint cannot know (``Ref``, ``Fn::GetAtt``, ``Fn::If``…) is skipped, and so is a missing ``ClusterName``
(CloudFormation generates one). Loaded with the other rules: ``cfn-lint --append-rules hyperpod_cdk.cfnlint_rules``.
"""

from __future__ import annotations

import re
from typing import Any

from cfnlint.rules import CloudFormationLintRule, RuleMatch

from hyperpod_cdk.aws_data.api_constraints import NOT_NULL, check_request
from hyperpod_cdk.cfnlint_rules.template import CLUSTER

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and any(k == "Ref" or k.startswith("Fn::") for k in value)


def template_path(member_path: str) -> list[str | int]:
    """``InstanceGroups[1].InstanceGroupName`` as cfn-lint's path below ``Properties``."""
    return [name if name else int(index) for name, index in _STEP.findall(member_path)]


class E9200ApiModel(CloudFormationLintRule):  # type: ignore[misc]  # cfn-lint ships no types
    """The SageMaker API model's constraints on the cluster's literal values."""

    id = "E9200"
    shortdesc = "HyperPod: the SageMaker API model's constraints"
    description = (
        "Every literal value of an AWS::SageMaker::Cluster meets the SageMaker API model (botocore service-2.json: "
        "required members, enums, ranges, lengths, patterns) and the CloudFormation schema where that is stricter"
    )
    source_url = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateCluster.html"
    tags = ["resources", "sagemaker", "hyperpod"]

    def match(self, cfn: Any) -> list[RuleMatch]:
        matches = []
        for name, resource in cfn.get_resources([CLUSTER]).items():
            properties = resource.get("Properties", {})
            if not isinstance(properties, dict):
                continue
            for violation in check_request(properties, "CreateCluster", unknown=_intrinsic):
                if violation.path == "ClusterName" and violation.constraint == NOT_NULL:
                    continue
                path = ["Resources", name, "Properties", *template_path(violation.path)]
                matches.append(
                    RuleMatch(
                        path,
                        f"{violation.path}: got {violation.value!r}; allowed: {violation.allowed} ({violation.source})",
                    )
                )
        return matches
