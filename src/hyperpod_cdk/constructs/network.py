"""ClusterNetwork: the VPC, the nodes' subnet and the EFA-ready security group."""

from __future__ import annotations

import jsii
from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from hyperpod_cdk.constructs.checks import check_props
from hyperpod_cdk.constructs.scanners import (
    DEFAULT_SG_FINDING,
    DEFAULT_SG_REASON,
    LOG_GROUP_KEY_REASON,
    LOG_GROUP_WITHOUT_KEY,
    explain_deploy_time_handler,
    skip_checkov,
)
from hyperpod_cdk.core.config import NetworkConfig

_DEFAULTS = NetworkConfig()
"""The config file's defaults are the props' defaults (one definition)."""
DUMMY_AZ_PREFIX = "dummy"
"""CDK's placeholder AZs (``dummy1a``...) before a stack's availability-zone lookup has run."""


@jsii.implements(ec2.IConnectable)
class ClusterNetwork(Construct):
    """Where the cluster's nodes live: one subnet in one Availability Zone, one security group.

    Builds a new single-AZ VPC (a private subnet for the nodes, a public subnet with a NAT gateway, an S3
    gateway endpoint and flow logs), or adopts an existing VPC and subnet. The security group allows all
    traffic to and from itself, as EFA requires, and nothing from anywhere else.

    :param vpc: an existing VPC. Default: a new VPC is created.
    :param subnet: the existing subnet for the nodes (required with ``vpc``). Default: the new VPC's private
        subnet.
    :param security_group: an existing security group for the nodes; it must already allow all traffic to
        and from itself. Default: a new EFA-ready group.
    :param availability_zone: AZ of the new VPC. Default: the region's first AZ.
    :param cidr: CIDR of the new VPC. Default: ``10.0.0.0/16``.
    :param private_subnet_cidr_mask: prefix length of the nodes' subnet; EFA instances use many addresses
        each. Default: 17 (32,766 addresses).
    :param flow_logs: send the new VPC's flow logs to CloudWatch Logs. Default: True.
    :param flow_log_retention: how long flow logs are kept. Default: one year.
    :param allow_internet_egress: allow the nodes to reach the internet (package mirrors, AWS endpoints)
        through the NAT gateway, and S3 through the gateway endpoint. False is refused (NET-EGRESS-CLOSED: AWS
        says instance groups without a way out cannot retrieve lifecycle scripts); to control egress, pass
        ``security_group``. Default: True.
    :param restrict_default_security_group: remove the new VPC's default security group's rules (CDK does
        it with a Lambda-backed custom resource). When False, the VPC's template metadata says why it is
        left to the account baseline (``scanners.DEFAULT_SG_REASON``). Default: True.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc | None = None,
        subnet: ec2.ISubnet | None = None,
        security_group: ec2.ISecurityGroup | None = None,
        availability_zone: str | None = None,
        cidr: str = _DEFAULTS.cidr,
        private_subnet_cidr_mask: int = _DEFAULTS.private_subnet_cidr_mask,
        flow_logs: bool = _DEFAULTS.flow_logs,
        flow_log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        allow_internet_egress: bool = _DEFAULTS.allow_internet_egress,
        restrict_default_security_group: bool = True,
    ) -> None:
        super().__init__(scope, id)
        problems: list[str] = []
        if vpc is not None and subnet is None:
            problems.append("subnet: required with an existing vpc. Fix: pass the subnet the nodes should use")
        if vpc is None and subnet is not None:
            problems.append("subnet: given without vpc. Fix: pass the subnet's vpc as well")
        if vpc is not None and availability_zone is not None:
            problems.append(
                "availability_zone: only applies to a new VPC; an existing subnet fixes the AZ. Fix: remove it"
            )
        check_props(
            self,
            "ClusterNetwork",
            {"network"},
            also=problems,
            instead_of=["NET-EXISTING"],  # the props are objects here: the checks above say it in their terms
            network=network_view(
                vpc=vpc,
                subnet=subnet,
                security_group=security_group,
                availability_zone=availability_zone,
                cidr=cidr,
                private_subnet_cidr_mask=private_subnet_cidr_mask,
                flow_logs=flow_logs,
                allow_internet_egress=allow_internet_egress,
            ),
            paths={"network": ""},
        )

        if vpc is None:
            vpc = self._new_vpc(
                cidr,
                availability_zone,
                private_subnet_cidr_mask,
                flow_logs,
                flow_log_retention,
                restrict_default_security_group,
            )
            subnet = vpc.select_subnets(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS).subnets[0]
        assert subnet is not None
        self.vpc: ec2.IVpc = vpc
        self.subnet: ec2.ISubnet = subnet
        self.security_group: ec2.ISecurityGroup = security_group or efa_security_group(self, vpc, allow_internet_egress)
        self._connections = ec2.Connections(security_groups=[self.security_group])

    @property
    def connections(self) -> ec2.Connections:
        """The nodes' security group, for rules from and to other resources."""
        return self._connections

    @property
    def availability_zone(self) -> str:
        return self.subnet.availability_zone

    @property
    def subnet_id(self) -> str:
        return self.subnet.subnet_id

    def _new_vpc(
        self,
        cidr: str,
        availability_zone: str | None,
        private_subnet_cidr_mask: int,
        flow_logs: bool,
        flow_log_retention: logs.RetentionDays,
        restrict_default_security_group: bool,
    ) -> ec2.Vpc:
        flow_log_options: dict[str, ec2.FlowLogOptions] = {}
        if flow_logs:
            log_group = logs.LogGroup(
                self, "FlowLogGroup", retention=flow_log_retention, removal_policy=RemovalPolicy.RETAIN
            )
            skip_checkov(log_group, LOG_GROUP_WITHOUT_KEY, LOG_GROUP_KEY_REASON)
            flow_log_options["FlowLogs"] = ec2.FlowLogOptions(
                destination=ec2.FlowLogDestination.to_cloud_watch_logs(log_group),
                traffic_type=ec2.FlowLogTrafficType.ALL,
            )
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(cidr),
            availability_zones=[availability_zone] if availability_zone else None,
            max_azs=None if availability_zone else 1,
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(
                    name="Nodes",
                    subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                    cidr_mask=private_subnet_cidr_mask,
                ),
            ],
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3),
            },
            flow_logs=flow_log_options,
            restrict_default_security_group=restrict_default_security_group,
        )
        if not restrict_default_security_group:
            skip_checkov(vpc, DEFAULT_SG_FINDING, DEFAULT_SG_REASON)
        # CDK adds one Lambda-backed provider per stack that empties the default security group's rules.
        provider = Stack.of(self).node.try_find_child("Custom::VpcRestrictDefaultSGCustomResourceProvider")
        handler = provider.node.try_find_child("Handler") if provider is not None else None
        if handler is not None:
            explain_deploy_time_handler(handler)
        return vpc


def efa_security_group(scope: Construct, vpc: ec2.IVpc, allow_internet_egress: bool) -> ec2.SecurityGroup:
    """A new ``NodeSecurityGroup`` in ``scope``: all traffic to and from itself (EFA), nothing from elsewhere."""
    group = ec2.SecurityGroup(
        scope,
        "NodeSecurityGroup",
        vpc=vpc,
        description="HyperPod nodes: all traffic to and from this group (EFA); nothing from elsewhere",
        # Egress to the internet (AWS endpoints, package mirrors) goes through the NAT gateway.
        allow_all_outbound=allow_internet_egress,
    )
    # EFA's rules must reference the group itself; CIDR rules do not count. The egress rule is
    # written out because CDK folds egress rules into allow_all_outbound.
    group.add_ingress_rule(group, ec2.Port.all_traffic(), "EFA and Slurm between cluster nodes")
    ec2.CfnSecurityGroupEgress(
        group,
        "EfaSelfEgress",
        group_id=group.security_group_id,
        destination_security_group_id=group.security_group_id,
        ip_protocol="-1",
        description="EFA and Slurm between cluster nodes",
    )
    return group


def network_view(
    *,
    vpc: ec2.IVpc | None,
    subnet: ec2.ISubnet | None,
    security_group: ec2.ISecurityGroup | None,
    availability_zone: str | None = None,
    cidr: str = _DEFAULTS.cidr,
    private_subnet_cidr_mask: int = _DEFAULTS.private_subnet_cidr_mask,
    flow_logs: bool = _DEFAULTS.flow_logs,
    allow_internet_egress: bool = _DEFAULTS.allow_internet_egress,
) -> NetworkConfig:
    """The network section as the rules read it, from props. The props always carry values (their defaults): only
    what a construct of this shape uses counts as given, so the "new VPC only" rule has nothing to say here. A
    subnet imported without its AZ leaves the AZ unknown (None), and the rules that need it skip it; so does CDK's
    placeholder AZ (``dummy1a``) of a stack whose context lookup has not run yet (the CLI looks it up and synthesizes
    again, which an error here would stop)."""
    if subnet is not None:
        try:
            availability_zone = subnet.availability_zone
        except RuntimeError:  # jsii raises CDK's "no availability zone was given" as RuntimeError
            availability_zone = None
    if availability_zone is not None and availability_zone.startswith(DUMMY_AZ_PREFIX):
        availability_zone = None
    return NetworkConfig.model_construct(
        _fields_set={"availability_zone"},
        cidr=cidr,
        availability_zone=availability_zone,
        private_subnet_cidr_mask=private_subnet_cidr_mask,
        vpc_id=vpc.vpc_id if vpc is not None else None,
        subnet_id=subnet.subnet_id if subnet is not None else None,
        security_group_id=security_group.security_group_id if security_group is not None else None,
        flow_logs=flow_logs,
        allow_internet_egress=allow_internet_egress,
    )
