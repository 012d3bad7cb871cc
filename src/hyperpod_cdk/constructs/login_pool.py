"""LoginPool: the login group's nodes behind one Network Load Balancer (SSH, TCP 22), with one set of SSH host keys
every login node installs from Secrets Manager, so users reach any login node by one name and no added or replaced
node raises a host-key warning (docs/login-pool.md).

Create it before the cluster (the login nodes' parameters name the keys' secret) and give it to
``HyperPodCluster(login_pool=...)``, which lets the login group's role read and write the secret and then calls
:meth:`LoginPool.serve`.

* Listener: TCP 22, passed through to sshd (the load balancer sees no SSH, only TCP).
* Targets: an ``ip`` target group on port 22 holding the login group's ``Running`` nodes by ``PrivatePrimaryIp``,
  kept by the REST API's registration function (:mod:`hyperpod_cdk.constructs.group_targets`).
* Health: HTTP ``GET /health`` on ``health_port``; each login node answers 200 while sshd answers and the node is not
  drained, 503 otherwise. "When the target of a Network Load Balancer fails the configured health checks and is
  deemed unhealthy, the load balancer terminates established connections and stops routing new connections to the
  target. With connection termination disabled the target is still considered unhealthy and won't receive new
  connections, but established connections are kept active, allowing them to gracefully close" and "Connection
  termination is enabled by default" (Network Load Balancers guide, "Edit target group attributes for your Network
  Load Balancer"): it is disabled here, so draining a node keeps its users' open sessions.
* Reach: the load balancer's security group admits only the allowed CIDRs and security groups on 22; the login
  nodes' security groups admit the load balancer's group on 22 and the health port.
* Host keys: a secret the stack creates with a generated placeholder (no key material in the template); the first
  login node replaces it with the pool's keys (PutSecretValue) and every node installs them. Retained by default: a
  redeploy keeps the pool's identity.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from hyperpod_cdk.constructs.group_targets import ServedCluster, register_group_nodes
from hyperpod_cdk.constructs.interfaces import NodeNetwork
from hyperpod_cdk.constructs.rest_functions import RestFunction, decrypt_via_secrets_manager
from hyperpod_cdk.constructs.scanners import SECRET_KEY_REASON, SECRET_WITHOUT_KEY, explain, skip_checkov
from hyperpod_cdk.core.errors import raise_if_any
from hyperpod_cdk.core.login_pool_config import DEFAULT_HEALTH_PORT
from hyperpod_cdk.model import InstanceGroup, NodeRole
from training_runtime.login_pool.params import LoginPoolParams

SSH_PORT = 22
HEALTH_PATH = "/health"
CONNECTION_TERMINATION = "target_health_state.unhealthy.connection_termination.enabled"
DRAINING_INTERVAL = "target_health_state.unhealthy.draining_interval_seconds"
HEALTH_INTERVAL = Duration.seconds(10)
"""Between health checks of a target: "The range is 5-300 seconds. The default is 30 seconds" (Network Load Balancers
guide, "Health checks for Network Load Balancer target groups"); 10 s takes a drained node out in about 20 s."""
HEALTHY_THRESHOLD = 2
"""Consecutive passes before a target is healthy: "The range is 2-10. The default is 5" (same page); a new login node
takes sessions after two."""
UNHEALTHY_THRESHOLD = 2
"""Consecutive failures before a target is unhealthy: "The range is 2-10. The default is 2" (same page)."""
DEREGISTRATION_DELAY = Duration.seconds(30)
"""Only a node that left the Running state is deregistered (the registration function): it has no session to
drain."""
ACCESS_LOGS_REASON = (
    'the listener is TCP (SSH passed through), and "Access logs are created only if the load balancer has a TLS '
    'listener, and the logs contain information about TLS requests only" (Network Load Balancers guide, "Access '
    'logs for your Network Load Balancer"): there would be nothing to log; sshd logs every login on the login node'
)
ROTATION_REASON = (
    "the pool's SSH host keys are its identity in every user's known_hosts: rotating them on a schedule would make "
    "every ssh warn of a changed host key; an operator replaces them deliberately (docs/login-pool.md)"
)
SHARED_GROUP_REASON = (
    "the login group shares the cluster's node security group, so the load balancer's group is admitted to that group "
    "on 22 and the health port; the load balancer sends only to its registered targets, which are the login group's "
    "nodes alone (the registration function), and nothing else is in its security group"
)


class LoginPool(Construct):
    """The login pool's AWS side: the host keys' secret, the load balancer and its security group, the target group
    that checks each login node's health endpoint.

    :param network: the nodes' VPC, subnet and security group.
    :param internet_facing: public addresses in the VPC's public subnet of the nodes' Availability Zone (True), or
        private addresses in the nodes' subnet (False). Default: False.
    :param allowed_cidrs: IPv4 CIDRs admitted on 22. Default: none (with no ``allowed_security_groups`` and an
        internal load balancer: the VPC's CIDR).
    :param allowed_security_groups: security groups whose members are admitted on 22. Default: none.
    :param host_name: the name users ssh to (``LoginPoolHostName``). Default: the load balancer's DNS name.
    :param health_port: each login node's health endpoint. Default: 2223.
    :param drain_grace_s: the target group's unhealthy draining interval (seconds). Default: AWS's (0).
    :param encryption_key: the key of the host keys' secret. Default: Secrets Manager's AWS managed key.
    :param removal_policy: what happens to the host keys' secret when it leaves the stack. Default: RETAIN.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        network: NodeNetwork,
        internet_facing: bool = False,
        allowed_cidrs: Sequence[str] = (),
        allowed_security_groups: Sequence[ec2.ISecurityGroup] = (),
        host_name: str | None = None,
        health_port: int = DEFAULT_HEALTH_PORT,
        drain_grace_s: int | None = None,
        encryption_key: kms.IKey | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, id)
        self.health_port = health_port
        vpc = network.vpc
        subnets = self._subnets(network, internet_facing)
        self.host_keys = secretsmanager.Secret(
            self,
            "HostKeys",
            description="The SSH host keys every login node of the pool presents (a placeholder until the first "
            "login node writes them)",
            encryption_key=encryption_key,
            removal_policy=removal_policy,
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=32, exclude_punctuation=True, include_space=False
            ),
        )
        explain(self.host_keys, ROTATION_REASON, checkov=("CKV2_AWS_57",), nag=("AwsSolutions-SMG4",))
        if self.host_keys.encryption_key is None:
            skip_checkov(self.host_keys, SECRET_WITHOUT_KEY, SECRET_KEY_REASON)
        self.security_group = ec2.SecurityGroup(
            self,
            "LoadBalancerSecurityGroup",
            vpc=vpc,
            allow_all_outbound=False,
            description="Login pool load balancer: the allowed networks in on SSH, the login nodes out",
        )
        ssh = ec2.Port.tcp(SSH_PORT)
        cidrs = list(allowed_cidrs)
        if not cidrs and not allowed_security_groups and not internet_facing:
            cidrs = [vpc.vpc_cidr_block]
        for index, cidr in enumerate(cidrs):
            self.security_group.add_ingress_rule(ec2.Peer.ipv4(cidr), ssh, f"SSH users {index}")
        for group in allowed_security_groups:
            self.security_group.add_ingress_rule(group, ssh, "SSH users")
        self.load_balancer = elbv2.NetworkLoadBalancer(
            self,
            "LoadBalancer",
            vpc=vpc,
            internet_facing=internet_facing,
            vpc_subnets=ec2.SubnetSelection(subnets=subnets),
            security_groups=[self.security_group],
        )
        explain(self.load_balancer, ACCESS_LOGS_REASON, checkov=("CKV_AWS_91",), nag=("AwsSolutions-ELB2",))
        self.target_group = elbv2.NetworkTargetGroup(
            self,
            "LoginNodes",
            vpc=vpc,
            port=SSH_PORT,
            protocol=elbv2.Protocol.TCP,
            target_type=elbv2.TargetType.IP,
            deregistration_delay=DEREGISTRATION_DELAY,
            health_check=elbv2.HealthCheck(
                protocol=elbv2.Protocol.HTTP,
                port=str(health_port),
                path=HEALTH_PATH,
                interval=HEALTH_INTERVAL,
                healthy_threshold_count=HEALTHY_THRESHOLD,
                unhealthy_threshold_count=UNHEALTHY_THRESHOLD,
                healthy_http_codes="200",
            ),
        )
        self.target_group.set_attribute(CONNECTION_TERMINATION, "false")
        if drain_grace_s is not None:  # "can only be configured when ...connection_termination.enabled is false"
            self.target_group.set_attribute(DRAINING_INTERVAL, str(drain_grace_s))
        self.listener = self.load_balancer.add_listener(
            "Ssh", port=SSH_PORT, protocol=elbv2.Protocol.TCP, default_target_groups=[self.target_group]
        )
        self.host_name = host_name or self.load_balancer.load_balancer_dns_name
        """The name users ssh to: the configured domain name, or the load balancer's DNS name."""
        self.registration: RestFunction | None = None

    def _subnets(self, network: NodeNetwork, internet_facing: bool) -> list[ec2.ISubnet]:
        if not internet_facing:
            return [network.subnet]
        zone = network.subnet.availability_zone
        public = [s for s in network.vpc.public_subnets if s.availability_zone == zone]
        raise_if_any(
            f"LoginPool {self.node.path}",
            []
            if public
            else [
                f"internet_facing: the VPC has no public subnet in the nodes' Availability Zone ({zone}), and an "
                "internet-facing load balancer lives in a public subnet (one routed to an internet gateway) of the "
                "zone its targets are in. Fix: pass a network whose VPC has one (ClusterNetwork builds one), or use "
                "an internal load balancer"
            ],
        )
        return public[:1]

    @property
    def key_arn(self) -> str | None:
        key = self.host_keys.encryption_key
        return key.key_arn if key is not None else None

    def node_parameters(self) -> LoginPoolParams:
        """``hyperpod_cdk.login_pool`` of the nodes' parameters file: the keys' secret, its Region, the health port."""
        return LoginPoolParams(self.host_keys.secret_arn, Stack.of(self).region, health_port=self.health_port)

    def grant_host_keys(self, role: iam.IRole) -> iam.Policy:
        """What a login node does with the pool's keys: read them (``GetSecretValue``) and, the first node only,
        write them over the placeholder (``PutSecretValue``), on this secret alone; with a key of yours,
        ``kms:Decrypt`` and ``kms:GenerateDataKey`` only as Secrets Manager's caller. A policy of ``role``'s own the
        cluster waits for."""
        statements = [
            iam.PolicyStatement(
                sid="LoginPoolHostKeys",
                actions=["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue"],
                resources=[self.host_keys.secret_arn],
            )
        ]
        key_arn = self.key_arn
        if key_arn is not None:
            statements.append(
                decrypt_via_secrets_manager(
                    self, key_arn, sid="LoginPoolHostKeysKey", actions=("kms:Decrypt", "kms:GenerateDataKey")
                )
            )
        return iam.Policy(self, "LoginNodesUseHostKeys", roles=[role], statements=statements)

    def serve(self, cluster: ServedCluster) -> InstanceGroup:
        """Point the load balancer at ``cluster``'s login group (returned): admit the load balancer's group to the
        login nodes' security groups on 22 and the health port, and keep the login group's running nodes
        registered."""
        login = next((g for g in cluster.instance_groups if g.role == NodeRole.LOGIN), None)
        raise_if_any(
            f"LoginPool {self.node.path}",
            [] if login is not None else ["the cluster has no login group. Fix: add one (role: login)"],
        )
        assert login is not None
        ports = [(ec2.Port.tcp(SSH_PORT), "SSH"), (ec2.Port.tcp(self.health_port), "the login pool's health check")]
        own = login.override_vpc.security_group_ids if login.override_vpc is not None else None
        self.shares_node_security_group = own is None
        """Whether the login group is in the cluster's node security group (see ``SHARED_GROUP_REASON``)."""
        peers: list[ec2.IConnectable] = (
            [cluster]
            if own is None
            else [
                ec2.SecurityGroup.from_security_group_id(self, f"LoginSecurityGroup{i}", sg) for i, sg in enumerate(own)
            ]
        )
        for peer in peers:
            for port, what in ports:
                self.security_group.connections.allow_to(peer, port, f"{what} to the login nodes")
        self.registration = register_group_nodes(
            self,
            cluster=cluster,
            group=login.name,
            target_group=self.target_group,
            port=SSH_PORT,
            nodes="login nodes",
            service="login pool",
            sid="Login",
        )
        return login
