"""Findings of CDK's built-in template validator, named by config field (the report's shape as aws-cdk-lib
2.275 writes it; tests/test_compliance.py checks it against a real synth)."""

from __future__ import annotations

from hyperpod_cdk.core.template_findings import findings

REPORT = {
    "pluginReports": [
        {
            "pluginName": "CloudFormation Validate",
            "violations": [
                {
                    "ruleName": "F3034",
                    "description": "InstanceGroups.0.InstanceCount: -3 is less than the minimum of 0",
                    "violatingConstructs": [
                        {
                            "constructPath": "s/Cluster/Resource",
                            "cloudFormationResource": {"propertyPaths": ["Properties.InstanceGroups.0.InstanceCount"]},
                        }
                    ],
                },
                {
                    "ruleName": "E3644",
                    "description": "InstanceGroups.InstanceType: 'ml.bogus.48xlarge' is not valid in any region",
                    "violatingConstructs": [
                        {
                            "constructPath": "s/Cluster/Resource",
                            "cloudFormationResource": {"propertyPaths": ["Properties.InstanceGroups.InstanceType"]},
                        }
                    ],
                },
            ],
        },
        {"pluginName": "cdk-nag", "violations": [{"ruleName": "AwsSolutions-S1", "violatingConstructs": [{}]}]},
    ]
}


def test_each_validator_finding_is_a_problem_at_its_config_field() -> None:
    assert [(p.path, p.rule) for p in findings(REPORT)] == [
        ("instance_groups[0].count", "CFN-F3034"),
        ("instance_groups[*].instance_type", "CFN-E3644"),
    ]  # cdk-nag's findings are the compliance tests' business, not synth's
