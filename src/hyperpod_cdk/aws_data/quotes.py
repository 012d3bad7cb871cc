"""AWS's own words that a config rule (:mod:`hyperpod_cdk.rules.aws_provisioning`) and its cfn-lint rule
(:mod:`hyperpod_cdk.cfnlint_rules.provisioning`) both quote, with their pages: one copy, no heavy import (cfn-lint loads
it). Each quote is a row of the AWS inventory (``data/aws_inventory``)."""

from __future__ import annotations

MIGRATION_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-slurm-api-config-migration.html"
DEEP_HEALTH_DOC = (
    "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-resiliency-slurm-deep-health-checks.html"
)
STRATEGY_QUOTE = (
    '"If you plan to later migrate the cluster to continuous provisioning (NodeProvisioningMode set to Continuous), '
    'keep the default Merge strategy."'
)
"""Row migration-keep-merge."""
NO_REVERT_QUOTE = (
    '"After a migration completes successfully, you cannot revert the cluster to the legacy '
    'provisioning_parameters.json configuration."'
)
"""Row migration-no-revert."""
AUTO_RESUME_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-resiliency-slurm-auto-resume.html"
RECOVERY_QUOTE = '"We recommend setting the Automatic option." (of None: "We do not recommend this option.")'
"""Row autoresume-recommend-automatic."""
REF_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-ref.html"
CONTROLLER_QUOTE = '"Exactly one instance group must have this node type."'
"""Row ref-one-controller (NodeType Controller)."""
LOGIN_QUOTE = '"At most one instance group can have this node type."'
"""Row ref-one-login (NodeType Login)."""
PARTITION_QUOTE = '"Required for Compute node types; not allowed for Controller or Login node types."'
"""Row ref-partition-compute-only (PartitionNames)."""
MULTI_HEAD_QUOTE = (
    '"If your cluster is configured with multiple controller (head) nodes using the SageMaker HyperPod multi-head '
    'node support, you cannot fully migrate to the API-driven configuration model at this time."'
)
"""Row migration-multi-head."""
PLANS_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/training-plan-utilization-for-hyperpod.html"
PRIMARY_QUOTE = (
    '"we do not recommend using a training plan for the primary instance group of a cluster, as primary nodes '
    "require continuous, stable resources that don't align with the fixed duration and potentially discontinuous "
    'nature of training plan capacities."'
)
"""Row tpu-not-primary."""
CMK_DOC = "https://docs.aws.amazon.com/sagemaker/latest/dg/smcluster-cmk.html"
KEY_PER_GROUP_QUOTE = (
    '"When using customer managed keys, we strongly recommend that you use different KMS keys for each instance group '
    'in your cluster."'
)
"""Row cmk-key-per-group."""
