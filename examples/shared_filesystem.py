"""Two clusters sharing one FSx for Lustre file system (a research environment where teams share datasets
and results). One stack holds the network and storage; each cluster has its own lifecycle prefix.

Synthesize: ``npx --no-install cdk synth --app "python examples/shared_filesystem.py"``
"""

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3

from hyperpod_cdk import (
    ClusterNetwork,
    HyperPodCluster,
    InstanceGroup,
    LifecycleScripts,
    LustreStorage,
    NodeRole,
    S3DataRepository,
)
from hyperpod_cdk.constructs import secure_bucket


def build(app: cdk.App) -> list[cdk.Stack]:
    stack = cdk.Stack(app, "research-environment")
    network = ClusterNetwork(stack, "Network")
    results: s3.IBucket = secure_bucket(stack, "Results")
    storage = LustreStorage(
        stack,
        "SharedStorage",
        network=network,
        storage_capacity_gib=2400,
        data_repositories=[S3DataRepository(name="results", bucket=results, file_system_path="/results")],
    )
    scripts_bucket = secure_bucket(stack, "LifecycleBucket")
    controller = InstanceGroup(name="controller", role=NodeRole.CONTROLLER, instance_type="ml.m5.xlarge", count=1)
    teams = {
        "interactive": InstanceGroup(name="g5", instance_type="ml.g5.2xlarge", count=2),
        "batch": InstanceGroup(name="p4d", instance_type="ml.p4d.24xlarge", count=4),
    }
    for team, workers in teams.items():
        # Each cluster gets its own lifecycle prefix (its parameters differ) in the shared bucket.
        lifecycle = LifecycleScripts(stack, f"{team.capitalize()}Lifecycle", bucket=scripts_bucket, prefix=f"{team}/")
        HyperPodCluster(
            stack,
            f"{team.capitalize()}Cluster",
            cluster_name=f"research-{team}",
            network=network,
            lifecycle=lifecycle,
            storage=storage,
            instance_groups=[controller, workers],
        )
    return [stack]


if __name__ == "__main__":
    application = cdk.App()
    build(application)
    application.synth()
