"""The login pool's AWS side as synthesized: a TCP 22 listener, an ip target group on 22 checked by HTTP GET /health
on the health port with unhealthy-target connection termination off (a drained node keeps its sessions) and the drain
grace, the security groups (the allowed networks in on 22, the login nodes admitting the load balancer on 22 and the
health port only), the host keys' secret (generated placeholder, retained, read and written by the login group's
role alone), the parameters file naming it, the registration function for the login group, the outputs; a published
template refuses it."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest

from hyperpod_cdk import ConfigurationError, TrainingClusterStack, parse_config
from hyperpod_cdk.constructs.login_pool import CONNECTION_TERMINATION, DRAINING_INTERVAL
from hyperpod_cdk.core import stack_outputs as out
from hyperpod_cdk.rest.targets import handler as targets
from support import fast_app, template_of
from training_runtime.login_pool.params import DEFAULT_HEALTH_PORT

GROUPS = [
    {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
    {"name": "login", "role": "login", "instance_type": "ml.m5.large", "count": 2},
    {"name": "workers", "instance_type": "ml.c5.xlarge", "count": 2},
]
POOL = {"allowed_cidrs": ["10.0.0.0/16", "192.168.10.0/24"], "domain_name": "login.example.com", "drain_grace_s": 900}


def build(**pool: Any) -> tuple[TrainingClusterStack, dict[str, Any]]:
    data = {"instance_groups": GROUPS, "login_pool": pool, "observability": {"enabled": False}}
    stack = TrainingClusterStack(fast_app(), "s", config=parse_config(data), env=cdk.Environment(region="us-west-2"))
    return stack, template_of(stack)


@pytest.fixture(scope="module")
def built() -> tuple[TrainingClusterStack, dict[str, Any]]:
    return build(**POOL)


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def logical_id(stack: cdk.Stack, construct: Any) -> str:
    return str(stack.resolve(construct.node.default_child.logical_id))


def ref(stack: cdk.Stack, construct: Any) -> dict[str, str]:
    return {"Ref": logical_id(stack, construct)}


def statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [
        s
        for p in of_type(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"].get("Roles", [])
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_the_listener_is_tcp_22_to_an_ip_target_group_checked_on_the_health_endpoint(built: Any) -> None:
    stack, template = built
    (listener,) = of_type(template, "AWS::ElasticLoadBalancingV2::Listener").values()
    assert (listener["Properties"]["Protocol"], listener["Properties"]["Port"]) == ("TCP", 22)
    assert listener["Properties"]["DefaultActions"][0]["TargetGroupArn"] == ref(stack, stack.login_pool.target_group)
    (balancer,) = of_type(template, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()
    assert (balancer["Properties"]["Scheme"], balancer["Properties"]["Type"]) == ("internal", "network")
    assert balancer["Properties"]["Subnets"] == [stack.resolve(stack.network.subnet.subnet_id)]
    (group,) = of_type(template, "AWS::ElasticLoadBalancingV2::TargetGroup").values()
    props = group["Properties"]
    assert (props["Protocol"], props["Port"], props["TargetType"]) == ("TCP", 22, "ip")
    health = {k: v for k, v in props.items() if k.startswith("HealthCheck") or k == "Matcher"}
    assert health["HealthCheckProtocol"] == "HTTP"
    assert (health["HealthCheckPort"], health["HealthCheckPath"]) == (str(DEFAULT_HEALTH_PORT), "/health")
    assert health["Matcher"] == {"HttpCode": "200"}  # 503 (drained) is a failure
    attributes = {a["Key"]: a["Value"] for a in props["TargetGroupAttributes"]}
    assert attributes[CONNECTION_TERMINATION] == "false"  # AWS's default (true) would cut the drained node's sessions
    assert attributes[DRAINING_INTERVAL] == "900"


def test_without_a_drain_grace_the_attribute_is_aws_default() -> None:
    _, template = build(health_port=2400)
    (group,) = of_type(template, "AWS::ElasticLoadBalancingV2::TargetGroup").values()
    attributes = {a["Key"]: a["Value"] for a in group["Properties"]["TargetGroupAttributes"]}
    assert DRAINING_INTERVAL not in attributes and attributes[CONNECTION_TERMINATION] == "false"
    assert group["Properties"]["HealthCheckPort"] == "2400"


def test_the_allowed_networks_reach_22_and_the_login_nodes_admit_the_load_balancer_only(built: Any) -> None:
    stack, template = built
    pool = stack.login_pool
    (lb_group,) = [
        r["Properties"]
        for k, r in of_type(template, "AWS::EC2::SecurityGroup").items()
        if k == logical_id(stack, pool.security_group)
    ]
    ingress = sorted((r["CidrIp"], r["FromPort"], r["ToPort"]) for r in lb_group["SecurityGroupIngress"])
    assert ingress == [("10.0.0.0/16", 22, 22), ("192.168.10.0/24", 22, 22)]
    lb = {"Fn::GetAtt": [logical_id(stack, pool.security_group), "GroupId"]}
    into_nodes = sorted(
        (r["Properties"]["FromPort"], r["Properties"]["ToPort"])
        for r in of_type(template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("SourceSecurityGroupId") == lb
    )
    assert into_nodes == [(22, 22), (DEFAULT_HEALTH_PORT, DEFAULT_HEALTH_PORT)]
    out_of_lb = sorted(
        (r["Properties"]["FromPort"], r["Properties"]["ToPort"])
        for r in of_type(template, "AWS::EC2::SecurityGroupEgress").values()
        if r["Properties"].get("GroupId") == lb
    )
    assert out_of_lb == into_nodes
    assert pool.shares_node_security_group


def test_an_internal_pool_without_an_allow_list_admits_the_vpc() -> None:
    stack, template = build()
    pool = stack.login_pool
    lb_group = template["Resources"][logical_id(stack, pool.security_group)]["Properties"]
    (rule,) = lb_group["SecurityGroupIngress"]
    assert rule["CidrIp"] == stack.resolve(stack.network.vpc.vpc_cidr_block) and rule["FromPort"] == 22


def test_an_internet_facing_pool_is_in_the_public_subnet_of_the_nodes_zone() -> None:
    stack, template = build(scheme="internet-facing", allowed_cidrs=["203.0.113.0/24"])
    (balancer,) = of_type(template, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()
    assert balancer["Properties"]["Scheme"] == "internet-facing"
    public = stack.network.vpc.public_subnets
    assert balancer["Properties"]["Subnets"] == [stack.resolve(public[0].subnet_id)]
    lb_group = template["Resources"][logical_id(stack, stack.login_pool.security_group)]["Properties"]
    assert [r["CidrIp"] for r in lb_group["SecurityGroupIngress"]] == ["203.0.113.0/24"]


def test_the_host_keys_are_a_generated_retained_secret_the_login_role_alone_reads_and_writes(built: Any) -> None:
    stack, template = built
    pool = stack.login_pool
    secret_id = logical_id(stack, pool.host_keys)
    secret = template["Resources"][secret_id]
    assert secret["DeletionPolicy"] == "Retain" and secret["UpdateReplacePolicy"] == "Retain"
    assert "SecretString" not in secret["Properties"] and "GenerateSecretString" in secret["Properties"]
    writers = {
        role["Ref"]
        for p in of_type(template, "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Resource"] == {"Ref": secret_id}
        for role in p["Properties"].get("Roles", [])
    }
    login_role = logical_id(stack, stack.cluster.execution_roles["login"])
    assert writers == {login_role}
    (granted,) = [s for s in statements(template, login_role) if s["Resource"] == {"Ref": secret_id}]
    assert sorted(granted["Action"]) == ["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue"]
    grant = logical_id(stack, pool.node.find_child("LoginNodesUseHostKeys"))  # the nodes read the keys at boot
    assert grant in template["Resources"][stack.resolve(stack.cluster.resource.logical_id)]["DependsOn"]


def test_the_parameters_file_names_the_secret_and_the_health_port(built: Any) -> None:
    stack, _ = built
    params = stack.lifecycle.parameters
    assert params is not None and params.login_pool is not None
    assert stack.resolve(params.login_pool.host_keys_secret_arn) == ref(stack, stack.login_pool.host_keys)
    assert params.login_pool.health_port == DEFAULT_HEALTH_PORT


def test_the_registration_function_keeps_the_login_group_on_22(built: Any) -> None:
    stack, template = built
    registration = stack.login_pool.registration
    assert registration is not None
    env = template["Resources"][logical_id(stack, registration.function)]["Properties"]["Environment"]["Variables"]
    group = ref(stack, stack.login_pool.target_group)
    assert (env[targets.GROUP_ENV], env[targets.TARGET_GROUP_ENV], env[targets.PORT_ENV]) == ("login", group, "22")
    by_sid = {s["Sid"]: s for s in statements(template, logical_id(stack, registration.role))}
    assert by_sid["RegisterLogin"]["Resource"] == group
    rules = [r["Properties"] for r in of_type(template, "AWS::Events::Rule").values()]
    assert len([r for r in rules if "login pool" in r["Description"]]) == 2


def test_the_outputs_name_the_pool(built: Any) -> None:
    stack, template = built
    outputs = template["Outputs"]
    assert outputs[out.LOGIN_POOL_HOST_NAME]["Value"] == "login.example.com"
    dns = {"Fn::GetAtt": [logical_id(stack, stack.login_pool.load_balancer), "DNSName"]}
    assert outputs[out.LOGIN_POOL_LOAD_BALANCER]["Value"] == dns
    assert outputs[out.LOGIN_POOL_HOST_KEYS_SECRET]["Value"] == ref(stack, stack.login_pool.host_keys)
    assert json.dumps(template).count("BEGIN OPENSSH") == 0


def test_a_published_template_refuses_the_pool() -> None:
    from hyperpod_cdk import PublishedTrainingClusterStack, PublishTarget

    config = parse_config({"instance_groups": GROUPS, "login_pool": {}})
    with pytest.raises(ConfigurationError, match="login_pool: a published template"):
        PublishedTrainingClusterStack(fast_app(), "p", config=config, target=PublishTarget("bucket", "teams/"))


def test_no_section_builds_nothing() -> None:
    stack = TrainingClusterStack(fast_app(), "s", config=parse_config({"instance_groups": GROUPS}))
    template = template_of(stack)
    assert stack.login_pool is None and stack.cluster.login_pool is None
    assert not [k for k in template["Outputs"] if k.startswith("LoginPool")]
    assert not [r for r in of_type(template, "AWS::Events::Rule").values() if "login" in r["Properties"]["Description"]]


def test_with_the_organizations_key_the_login_role_uses_it_through_secrets_manager_only() -> None:
    key = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    data = {"instance_groups": GROUPS, "login_pool": {}, "organization": {"kms_key_arn": key}}
    stack = TrainingClusterStack(fast_app(), "s", config=parse_config(data), env=cdk.Environment(region="us-west-2"))
    template = template_of(stack)
    assert stack.login_pool is not None and stack.login_pool.key_arn is not None
    login_role = logical_id(stack, stack.cluster.execution_roles["login"])
    (use,) = [s for s in statements(template, login_role) if s.get("Sid") == "LoginPoolHostKeysKey"]
    assert sorted(use["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert "kms:ViaService" in use["Condition"]["StringEquals"]
