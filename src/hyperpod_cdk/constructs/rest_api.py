"""SlurmRestApi: Slurm's REST API reached over TLS through an internal Network Load Balancer, with its signing key,
its target registration and the function that mints tokens for IAM callers (docs/rest-api.md).

Create it before the cluster (the controller's parameters name the key's secret) and give it to
``HyperPodCluster(rest_api=...)``, which lets the controller read the key and then calls :meth:`SlurmRestApi.serve`.

* TLS: the listener presents your ACM certificate with ``ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09`` (TLS 1.3 and
  1.2 with forward-secret AEAD ciphers and hybrid post-quantum key exchange), the Elastic Load Balancing console's
  default: created any other way "the default security policy is ELBSecurityPolicy-2016-08" (Network Load Balancers
  guide, "Security policies for your Network Load Balancer"), so it is set here. The target group is ``TLS`` too: the
  load balancer re-encrypts to the controller, which serves TLS with a certificate of its own.
* Targets: HyperPod's nodes are not the account's EC2 instances, so the target group is of type ``ip`` and a function
  registers the controller group's running nodes by ``PrivatePrimaryIp`` (:mod:`hyperpod_cdk.rest.targets`).
* Reach: the load balancer's security group admits only ``allowed_cidrs`` and ``allowed_security_groups`` on the
  port; the controller's admits the load balancer's group on that port only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import Duration, Stack
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from hyperpod_cdk.constructs.group_targets import ServedCluster, register_group_nodes
from hyperpod_cdk.constructs.interfaces import NodeNetwork
from hyperpod_cdk.constructs.rest_functions import RestFunction, TokenMinter, decrypt_via_secrets_manager
from hyperpod_cdk.constructs.scanners import SECRET_KEY_REASON, SECRET_WITHOUT_KEY, explain, skip_checkov
from hyperpod_cdk.core.rest_api_config import DEFAULT_PORT, DEFAULT_TOKEN_LIFETIME_S, KEY_LENGTH
from hyperpod_cdk.model import NodeRole
from hyperpod_cdk.rest.minter.identity import principal_key
from training_runtime.rest.params import RestApiParams

TLS_POLICY = "ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09"


ACCESS_LOGS_REASON = (
    "every request is logged where it is decided: the minting function logs each token with the caller's IAM ARN "
    "and Slurm user, slurmrestd and slurmctld log each call with the user; the load balancer's access logs (TLS "
    "handshakes) need a bucket its log delivery can write with your encryption: add them with "
    "load_balancer.log_access_logs(bucket)"
)
ROTATION_REASON = (
    "the key is rotated by an operator (hyperpod-cdk rest rotate-key: a new AWSCURRENT version Secrets Manager "
    "generates), so that the controller and the minting function change keys together (docs/rest-api.md)"
)


class SlurmRestApi(Construct):
    """The REST API's AWS side: the signing key, the load balancer and its security group, the minting function.

    :param network: the nodes' VPC, subnet and security group; the load balancer is internal, in that subnet.
    :param certificate: the listener's ACM certificate.
    :param tls_name: the name on the certificate that clients verify (the stack's ``RestApiTlsName``).
    :param port: the listener's and the controller's port. Default: 6820.
    :param token_lifetime_s: each minted token's lifetime. Default: 900.
    :param allowed_cidrs: IPv4 CIDRs admitted to the load balancer on the port. Default: none.
    :param allowed_security_groups: security groups whose members are admitted on the port. Default: none.
    :param identities: IAM role or user ARN -> Slurm user. Default: none.
    :param principal_tag: an IAM tag key whose value on the caller's role or user names its Slurm user. Default: none.
    :param tag_users: the Slurm users a tag may name (the config's users). Default: any but root and slurm.
    :param encryption_key: the key of the signing key's secret. Default: Secrets Manager's AWS managed key (an
        ``OrganizationRules`` key reaches the secret through its property injector instead).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        network: NodeNetwork,
        certificate: acm.ICertificate,
        tls_name: str,
        port: int = DEFAULT_PORT,
        token_lifetime_s: int = DEFAULT_TOKEN_LIFETIME_S,
        allowed_cidrs: Sequence[str] = (),
        allowed_security_groups: Sequence[ec2.ISecurityGroup] = (),
        identities: Mapping[str, str] | None = None,
        principal_tag: str | None = None,
        tag_users: Sequence[str] = (),
        encryption_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.port, self.token_lifetime_s, self.tls_name = port, token_lifetime_s, tls_name
        self.key = secretsmanager.Secret(
            self,
            "SigningKey",
            description="The HS256 key of the cluster's Slurm REST API tokens (slurmctld and the minting function)",
            encryption_key=encryption_key,
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=KEY_LENGTH, exclude_punctuation=True, include_space=False
            ),
        )
        explain(self.key, ROTATION_REASON, checkov=("CKV2_AWS_57",), nag=("AwsSolutions-SMG4",))
        if self.key.encryption_key is None:
            skip_checkov(self.key, SECRET_WITHOUT_KEY, SECRET_KEY_REASON)
        vpc = network.vpc
        self.security_group = ec2.SecurityGroup(
            self,
            "LoadBalancerSecurityGroup",
            vpc=vpc,
            allow_all_outbound=False,
            description="Slurm REST API load balancer: the configured callers in, the controller out",
        )
        listener_port = ec2.Port.tcp(port)
        for cidr in allowed_cidrs:
            self.security_group.add_ingress_rule(ec2.Peer.ipv4(cidr), listener_port, f"REST API callers {cidr}")
        for group in allowed_security_groups:
            self.security_group.add_ingress_rule(group, listener_port, "REST API callers")
        self.load_balancer = elbv2.NetworkLoadBalancer(
            self,
            "LoadBalancer",
            vpc=vpc,
            internet_facing=False,
            vpc_subnets=ec2.SubnetSelection(subnets=[network.subnet]),
            security_groups=[self.security_group],
        )
        explain(self.load_balancer, ACCESS_LOGS_REASON, checkov=("CKV_AWS_91",), nag=("AwsSolutions-ELB2",))
        self.target_group = elbv2.NetworkTargetGroup(
            self,
            "Controller",
            vpc=vpc,
            port=port,
            protocol=elbv2.Protocol.TLS,
            target_type=elbv2.TargetType.IP,
            deregistration_delay=Duration.seconds(30),
            health_check=elbv2.HealthCheck(protocol=elbv2.Protocol.TCP, interval=Duration.seconds(10)),
        )
        self.listener = self.load_balancer.add_listener(
            "Tls",
            port=port,
            protocol=elbv2.Protocol.TLS,
            certificates=[elbv2.ListenerCertificate.from_certificate_manager(certificate)],
            ssl_policy=elbv2.SslPolicy.TLS13_12_RES_PQ,  # TLS_POLICY (tests/test_rest_api_construct.py)
            default_target_groups=[self.target_group],
        )
        self.encryption_key = encryption_key
        mapping = {principal_key(arn) or arn: user for arn, user in (identities or {}).items()}
        self.minter = TokenMinter(
            self,
            "Tokens",
            key_secret_arn=self.key.secret_arn,
            key_arn=self._key_arn(),
            lifetime_s=token_lifetime_s,
            identities=mapping,
            principal_tag=principal_tag,
            tag_users=tuple(tag_users),
        )
        self.registration: RestFunction | None = None

    def _key_arn(self) -> str | None:
        key = self.key.encryption_key
        return key.key_arn if key is not None else None

    @property
    def endpoint(self) -> str:
        """``https://<load balancer DNS name>:<port>``: the client connects here and verifies ``tls_name``."""
        return f"https://{self.load_balancer.load_balancer_dns_name}:{self.port}"

    @property
    def token_url(self) -> str:
        """The minting function's URL."""
        return self.minter.url.url

    def node_parameters(self) -> RestApiParams:
        """``hyperpod_cdk.rest_api`` of the nodes' parameters file: the key's secret, its Region, the port."""
        return RestApiParams(
            key_secret_arn=self.key.secret_arn,
            region=Stack.of(self).region,
            port=self.port,
            token_lifetime_s=self.token_lifetime_s,
        )

    def grant_read_key(self, role: iam.IRole) -> iam.Policy:
        """``secretsmanager:GetSecretValue`` on the key's secret (and ``kms:Decrypt`` through Secrets Manager on its
        key, when it has one of yours), in a policy of ``role``'s own that the cluster waits for."""
        statements = [
            iam.PolicyStatement(
                sid="ReadRestSigningKey", actions=["secretsmanager:GetSecretValue"], resources=[self.key.secret_arn]
            )
        ]
        key_arn = self._key_arn()
        if key_arn is not None:
            statements.append(decrypt_via_secrets_manager(self, key_arn))
        return iam.Policy(self, "ControllerReadsKey", roles=[role], statements=statements)

    def serve(self, cluster: ServedCluster) -> None:
        """Point the load balancer at ``cluster``'s controller: admit it to the controller's security groups on the
        port and register the controller group's running nodes (a function run on HyperPod's events and every five
        minutes)."""
        controller = next(g for g in cluster.instance_groups if g.role == NodeRole.CONTROLLER)
        own_groups = (
            [
                ec2.SecurityGroup.from_security_group_id(self, f"ControllerSecurityGroup{i}", sg)
                for i, sg in enumerate(controller.override_vpc.security_group_ids)
            ]
            if controller.override_vpc is not None
            else None
        )
        port = ec2.Port.tcp(self.port)
        if own_groups is None:
            self.security_group.connections.allow_to(cluster, port, "Slurm REST API on the controller")
        else:
            for group in own_groups:
                self.security_group.connections.allow_to(group, port, "Slurm REST API on the controller")
        self.registration = register_group_nodes(
            self,
            cluster=cluster,
            group=controller.name,
            target_group=self.target_group,
            port=self.port,
            nodes="controller",
            service="Slurm REST API",
            sid="Controller",
        )

    def grant_mint_token(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` call the minting URL (it gets a token only for the Slurm user the config maps it to)."""
        return self.minter.grant_mint(grantee)

    def grant_rotate_key(self, grantee: iam.IGrantable) -> iam.Grant:
        """What ``hyperpod-cdk rest rotate-key`` needs: a new version of the key's secret from a random password
        Secrets Manager generates (``GetRandomPassword`` has no resource type: granted on *)."""
        grant = iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["secretsmanager:PutSecretValue", "secretsmanager:DescribeSecret"],
            resource_arns=[self.key.secret_arn],
        )
        grant.combine(
            iam.Grant.add_to_principal(
                grantee=grantee, actions=["secretsmanager:GetRandomPassword"], resource_arns=["*"]
            )
        )
        key = self.key.encryption_key
        if key is not None:
            key.grant_encrypt(grantee)
        return grant
