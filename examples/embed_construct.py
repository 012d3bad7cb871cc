"""Embedding one construct in someone else's stack: a platform team's existing stack owns the VPC and its
security group; it adds a hyperpod-cdk LustreStorage for the GPU nodes it already runs.

Synthesize: ``npx --no-install cdk synth --app "python examples/embed_construct.py"``
"""

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from hyperpod_cdk import ClusterNetwork, LustreStorage


class PlatformStack(cdk.Stack):
    """Stands for a stack the platform team already has; only the last lines are hyperpod-cdk."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "CorporateVpc",
            vpc_id="vpc-0a1b2c3d4e5f67890",
            availability_zones=["us-west-2a"],
            private_subnet_ids=["subnet-0a1b2c3d4e5f67890"],
        )
        nodes = ec2.SecurityGroup.from_security_group_id(self, "GpuNodes", "sg-0a1b2c3d4e5f67890")

        network = ClusterNetwork(self, "TrainingNetwork", vpc=vpc, subnet=vpc.private_subnets[0], security_group=nodes)
        self.scratch = LustreStorage(self, "Scratch", network=network, storage_capacity_gib=2400)
        cdk.CfnOutput(self, "ScratchDnsName", value=self.scratch.dns_name)
        cdk.CfnOutput(self, "ScratchMountName", value=self.scratch.mount_name)


def build(app: cdk.App) -> list[cdk.Stack]:
    return [PlatformStack(app, "platform-gpu-nodes")]


if __name__ == "__main__":
    application = cdk.App()
    build(application)
    application.synth()
