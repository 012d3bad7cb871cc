"""A team's existing CDK app - its own VPC, FSx for Lustre file system, data bucket and operators' role, all made
with aws-cdk-lib - adds a HyperPod cluster with two hyperpod-cdk constructs, on CDK's own types.

Synthesize (from this directory): ``npx --no-install cdk synth``; or ``python app.py <outdir>``.
"""

from __future__ import annotations

import sys

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_cdk import HyperPodCluster, InstanceGroup, LifecycleScripts, NodeRole
from hyperpod_cdk.constructs.nag import acknowledge_wildcard_resource


class TeamStack(cdk.Stack):
    """The team's stack as it was (network, scratch file system, data, operators), plus the cluster at the end."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        # --- what the team already had: plain aws-cdk-lib ---
        vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=1,
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="Private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=18),
            ],
            flow_logs={
                "All": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                        logs.LogGroup(self, "FlowLogs", retention=logs.RetentionDays.ONE_YEAR)
                    )
                )
            },
            restrict_default_security_group=False,
        )
        nodes_subnet = vpc.private_subnets[0]
        scratch = fsx.LustreFileSystem(
            self,
            "Scratch",
            vpc=vpc,
            vpc_subnet=nodes_subnet,
            storage_capacity_gib=1200,
            lustre_configuration=fsx.LustreConfiguration(
                deployment_type=fsx.LustreDeploymentType.PERSISTENT_2, per_unit_storage_throughput=250
            ),
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        data = s3.Bucket(
            self,
            "Data",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=True,
        )
        operators = iam.Role(self, "Operators", assumed_by=iam.AccountRootPrincipal())

        # --- the HyperPod cluster, on the team's own VPC, subnet and file system ---
        cluster = HyperPodCluster(
            self,
            "Cluster",
            cluster_name="team-cluster",
            vpc=vpc,
            subnets=nodes_subnet,  # or ec2.SubnetSelection(...); the nodes get a new EFA-ready security group
            storage=scratch,  # any LustreTarget: the nodes are admitted to its security group on its port range
            lifecycle=LifecycleScripts(self, "Lifecycle"),
            instance_groups=[
                InstanceGroup(name="controller", role=NodeRole.CONTROLLER, instance_type="ml.m5.xlarge", count=1),
                InstanceGroup(name="workers", instance_type="ml.g5.8xlarge", count=2),
            ],
        )
        for role in cluster.roles_of(NodeRole.COMPUTE, NodeRole.LOGIN):  # jobs and users read the training data
            data.grant_read(role)
        cluster.grant_operate(operators)  # the operators may reboot, replace and delete its nodes (hyperpod-cdk CLI)
        cdk.CfnOutput(self, "ClusterArn", value=cluster.cluster_arn)
        self._explain(data)

    def _explain(self, data: s3.Bucket) -> None:
        """The team's reasons for what cdk-nag (AwsSolutions) would otherwise report on their own resources."""
        reasons = {
            "AwsSolutions-S1": "the team's data bucket: access is audited with CloudTrail data events",
            "AwsSolutions-IAM5[Action::s3:GetObject*]": "read of every object of the data bucket, by design",
            "AwsSolutions-IAM5[Action::s3:List*]": "listing the data bucket, by design",
        }
        for finding, reason in reasons.items():
            cdk.Validations.of(self).acknowledge(cdk.Acknowledgment(id=finding, reason=reason))
        acknowledge_wildcard_resource(self, f"{data.bucket_arn}/*", "every object of the data bucket, by design")


def build(app: cdk.App) -> list[cdk.Stack]:
    return [TeamStack(app, "team-with-hyperpod")]


if __name__ == "__main__":
    application = cdk.App(outdir=sys.argv[1]) if len(sys.argv) > 1 else cdk.App()
    build(application)
    application.synth()
