"""ClusterNetwork: a single-AZ VPC with the EFA-ready node security group, or an existing VPC."""

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from builders import new_stack, only
from hyperpod_cdk import ClusterNetwork, ConfigurationError


@pytest.fixture(scope="module")
def template() -> Template:
    stack = new_stack()
    ClusterNetwork(stack, "Network")
    return Template.from_stack(stack)


def test_new_vpc_has_one_private_and_one_public_subnet(template: Template) -> None:
    template.resource_count_is("AWS::EC2::VPC", 1)
    template.resource_count_is("AWS::EC2::Subnet", 2)
    template.resource_count_is("AWS::EC2::NatGateway", 1)
    template.has_resource_properties("AWS::EC2::Subnet", {"MapPublicIpOnLaunch": False, "CidrBlock": "10.0.128.0/17"})


def test_s3_gateway_endpoint_and_flow_logs(template: Template) -> None:
    _, endpoint = only(template, "AWS::EC2::VPCEndpoint")
    assert endpoint["Properties"]["VpcEndpointType"] == "Gateway"
    assert endpoint["Properties"]["ServiceName"] == {
        "Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".s3"]]
    }, "the gateway endpoint is S3's"
    template.has_resource_properties("AWS::EC2::FlowLog", {"TrafficType": "ALL"})
    template.has_resource("AWS::Logs::LogGroup", {"DeletionPolicy": "Retain"})


def test_security_group_allows_itself_and_nothing_from_the_world(template: Template) -> None:
    group_id, group = only(template, "AWS::EC2::SecurityGroup")
    assert "SecurityGroupIngress" not in group["Properties"]
    self_ref = {"Fn::GetAtt": [group_id, "GroupId"]}
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {"IpProtocol": "-1", "GroupId": self_ref, "SourceSecurityGroupId": self_ref},
    )
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {"IpProtocol": "-1", "GroupId": self_ref, "DestinationSecurityGroupId": self_ref},
    )
    for rule in template.find_resources("AWS::EC2::SecurityGroupIngress").values():
        assert "CidrIp" not in rule["Properties"]


def test_closing_internet_egress_is_refused() -> None:
    """Without a way out the nodes reach neither S3 nor AWS's endpoints (prerequisites page; NET-EGRESS-CLOSED)."""
    with pytest.raises(ConfigurationError, match=r"cannot store or retrieve lifecycle scripts.*NET-EGRESS-CLOSED"):
        ClusterNetwork(new_stack(), "Network", allow_internet_egress=False)


def test_existing_vpc_creates_no_network_resources() -> None:
    stack = new_stack()
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=["us-east-1a"],
        private_subnet_ids=["subnet-0123456789abcdef0"],
    )
    network = ClusterNetwork(stack, "Network", vpc=vpc, subnet=vpc.private_subnets[0])
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::EC2::VPC", 0)
    template.resource_count_is("AWS::EC2::Subnet", 0)
    template.has_resource_properties("AWS::EC2::SecurityGroup", {"VpcId": "vpc-0123456789abcdef0"})
    assert network.subnet_id == "subnet-0123456789abcdef0"


def test_conflicting_inputs_are_reported_together() -> None:
    stack = new_stack()
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["us-east-1a"])
    with pytest.raises(ConfigurationError) as error:
        ClusterNetwork(stack, "Network", vpc=vpc, availability_zone="us-east-1b", private_subnet_cidr_mask=8)
    assert [p.split(":")[0] for p in error.value.problems] == ["subnet", "availability_zone"]


def test_props_go_through_the_network_rules() -> None:
    stack = new_stack()
    with pytest.raises(ConfigurationError) as error:
        ClusterNetwork(stack, "Network", cidr="10.0.0.1/16", private_subnet_cidr_mask=29)
    problems = error.value.problems
    assert [(p.path, p.rule) for p in problems] == [  # type: ignore[attr-defined]
        ("cidr", "NET-CIDR"),
        ("private_subnet_cidr_mask", "NET-SUBNET-MASK"),
    ]
    assert "Fix: use 10.0.0.0/16" in problems[0]
