"""HyperPodCluster: the groups' execution roles and the AWS::SageMaker::Cluster with its Slurm groups."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import jsii
from aws_cdk import Tags, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IConstruct

from hyperpod_cdk.constructs.checks import check_props
from hyperpod_cdk.constructs.cluster_grants import ClusterBase, ImportedCluster
from hyperpod_cdk.constructs.execution_role import grant_directory_secret, grant_runtime_secret, grant_volume_keys
from hyperpod_cdk.constructs.group_api import accounting_database, group_api_properties, slurm_and_storage
from hyperpod_cdk.constructs.interfaces import LustreTarget, NodeNetwork, OpenZfsTarget
from hyperpod_cdk.constructs.lifecycle import LifecycleSource
from hyperpod_cdk.constructs.node_roles import distinct, execution_roles, keep_deployed
from hyperpod_cdk.constructs.placement import (
    admit,
    admit_group_security_groups,
    fsx_keys,
    node_placement,
    openzfs_view,
    storage_dependencies,
)
from hyperpod_cdk.constructs.scaler import ScalerPolicy
from hyperpod_cdk.core.errors import raise_if_any
from hyperpod_cdk.core.parameters import parameters_file, with_resources, written_group
from hyperpod_cdk.core.suppress import Suppression, merged, silenced, template_metadata
from hyperpod_cdk.model import (
    DEFAULT_FSX_MOUNT_PATH,
    InstanceGroup,
    NodeProvisioningMode,
    NodeRecovery,
    NodeRole,
    SlurmConfigStrategy,
    SlurmMode,
)
from hyperpod_cdk.preflight import load as load_online_rules
from hyperpod_cdk.rules import REGISTRY
from training_runtime.options import parse_options
from training_runtime.params import ENTRYPOINT_BY_MODE, MetricsTarget, ProvisioningParameters

if TYPE_CHECKING:
    from hyperpod_cdk.constructs.login_pool import LoginPool
    from hyperpod_cdk.constructs.rest_api import SlurmRestApi
    from hyperpod_cdk.core.deployment import Deployment


@jsii.implements(ec2.IConnectable)
class HyperPodCluster(ClusterBase):
    """A SageMaker HyperPod cluster orchestrated by Slurm.

    Creates an execution role per instance group (:mod:`~hyperpod_cdk.constructs.node_roles`: AWS's managed
    instance policy, the ENI permissions HyperPod needs in your VPC, read access to the lifecycle prefix's objects
    through ``LifecycleScripts.grant_read``, which also lets the nodes list the bucket, and the group's volume key)
    and the cluster, created only after the lifecycle upload, the roles' policies and the file system exist. Only
    the controller's role gets the scaler's policy on this cluster (when a group scales,
    :class:`~hyperpod_cdk.constructs.scaler.ScalerPolicy`, created after the cluster) and the external accounting
    database's secret.
    ``grant_describe``/``grant_operate``/``grant_reconfigure``/``grant_connect`` give a principal the operator
    CLI's commands on this cluster (:class:`~hyperpod_cdk.constructs.cluster_grants.ClusterBase`).
    ``execution_roles`` maps each group's name to its role (a
    :class:`~hyperpod_cdk.constructs.execution_role.NodeExecutionRole` unless ``role`` is given, with
    ``grant_read_bucket``/``grant_decrypt``/``grant_read_secret`` for what the nodes read); ``roles_of`` gives the
    roles of some kinds of group (``roles_of(NodeRole.COMPUTE, NodeRole.LOGIN)``: where jobs and users run);
    ``controller_role`` is the controller's.

    :param cluster_name: HyperPod cluster name (changing it replaces the cluster); may be a token (a
        ``CfnParameter``).
    :param slurm_cluster_name: the name the nodes give the Slurm cluster (their parameters file). Default:
        ``cluster_name``. Give a concrete name when ``cluster_name`` is a template parameter, so the
        parameters file holds no CloudFormation value.
    :param network: the nodes' VPC, subnet and security group (a ``ClusterNetwork``, or anything with ``vpc``,
        ``subnet``, ``security_group`` and ``connections``: :class:`~hyperpod_cdk.constructs.interfaces.NodeNetwork`).
        Default: none; then give ``vpc``.
    :param vpc: the nodes' VPC, instead of ``network``. Default: none.
    :param subnets: with ``vpc``: the nodes' subnet, or a selection of the VPC's subnets. Default: the VPC's
        private subnets.
    :param security_groups: with ``vpc``: the nodes' security groups; they must allow all traffic to and from
        themselves (EFA's rule), which the cluster adds only to a group it creates (it adds to yours at most the
        egress to a file system it admits the nodes to, when the group does not allow all outbound traffic).
        Default: a new group with that rule (``NodeSecurityGroup``).
    :param lifecycle: the lifecycle-script prefix; the cluster's parameters are added to it.
    :param instance_groups: one controller group, at most one login group, one or more compute groups.
    :param storage: FSx for Lustre mounted on every node: ``LustreStorage``, aws-cdk-lib's ``fsx.LustreFileSystem``
        or an unowned import (``LustreStorage.from_lustre_attributes``), any
        :class:`~hyperpod_cdk.constructs.interfaces.LustreTarget`. The nodes are admitted to its security groups,
        except an import's (its rules are yours). Default: none.
    :param openzfs: FSx for OpenZFS that HyperPod mounts on every node (API-driven mode only); the users' homes
        live on it: ``OpenZfsStorage`` or an unowned import (``OpenZfsStorage.from_open_zfs_attributes``), any
        :class:`~hyperpod_cdk.constructs.interfaces.OpenZfsTarget`. Default: none.
    :param mode: who configures Slurm. Default: ``SlurmMode.API_DRIVEN`` (AWS's recommended model).
    :param fsx_mount_path: where the file system is mounted. Default: ``/fsx``.
    :param node_recovery: Default: ``NodeRecovery.AUTOMATIC``.
    :param slurm_config_strategy: API-driven mode without continuous provisioning only (HyperPod rejects any
        strategy with continuous provisioning, rule CL-CONTINUOUS-STRATEGY). Default: ``SlurmConfigStrategy.MERGE``
        there, which keeps a later move to continuous provisioning possible (AWS's migration guide; another strategy
        warns, CL-STRATEGY-MERGE), none with continuous provisioning.
    :param node_provisioning_mode: ``NodeProvisioningMode.CONTINUOUS``: partial capacity is accepted and
        worker launches are retried (new clusters only). Default: none (HyperPod's all-or-nothing model).
    :param role: one execution role for every group (yours: the cluster adds the lifecycle read, the volume keys,
        the accounting secret and the scaler's policy to it, so any process on any node can use all of them).
        Default: a new role per group with least privilege (a group's ``execution_role: controller`` puts it on
        the controller's).
    :param runtime_options: options passed to the node runtime through the parameters. Default: none.
    :param tags: tags for the cluster and its roles. Default: none.
    :param suppress: rules to silence, each a ``Suppression(rule, reason)`` or ``{"rule": ..., "reason": ...}``
        (the config's ``suppress``): their findings are not annotated, and the cluster resource's metadata lists
        them (``hyperpod-cdk: {suppressed: [...]}``) and tells cfn-lint to skip their cfn-lint rules. An error
        the AWS API raises cannot be suppressed (CL-SUPPRESS). Default: none.
    :param accept_unconfirmed: the former form of ``suppress``: rule ids of settings of unconfirmed Slurm support
        you have checked, each suppressed with the reason "checked: unconfirmed Slurm support accepted".
        Default: none.
    :param metrics: where the nodes remote-write their metrics (``ClusterObservability.metrics_target``; the
        role needs ``aps:RemoteWrite`` there, which ``ClusterObservability.watch`` grants). Default: nowhere.
    :param deployment: what the nodes get (:func:`hyperpod_cdk.core.deployment.deployment` of the config these props
        come from, as ``TrainingCluster`` passes it): its parameters file is uploaded, with only the values this
        construct's resources give it filled in (the FSx names, ``metrics``). Its cluster name, mode and node
        provisioning mode must be these props'. Default: a file built from these props
        (:func:`hyperpod_cdk.core.parameters.parameters_file`; an instance type that is a token is left to each node).
    :param deployed_roles: each group's ``ExecutionRole`` ARN in the deployed cluster (read by
        :func:`hyperpod_cdk.deployed.roles.deployed_roles`): a deployed group keeps its role, as AWS's guide asks
        (a group on the controller's deployed role stays on the controller's, with a warning; a template that would
        change a group's role, ``role``'s included, is an error; docs/execution-roles.md). Default: None (no
        cluster yet: each group gets the role its ``execution_role`` says).
    :param rest_api: Slurm's REST API (:class:`~hyperpod_cdk.constructs.rest_api.SlurmRestApi`, made before the
        cluster): the controller gets its key's secret in the parameters and may read it, the load balancer is
        pointed at the controller, and ``grant_mint_token`` lets a principal mint tokens. Default: none.
    :param login_pool: the login pool (:class:`~hyperpod_cdk.constructs.login_pool.LoginPool`, made before the
        cluster): the login nodes get its host keys' secret and health port in the parameters, the login group's role
        alone may read and write the secret, and the load balancer is pointed at the login group. Default: none.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster_name: str,
        lifecycle: LifecycleSource,
        instance_groups: Sequence[InstanceGroup],
        network: NodeNetwork | None = None,
        vpc: ec2.IVpc | None = None,
        subnets: ec2.SubnetSelection | ec2.ISubnet | None = None,
        security_groups: Sequence[ec2.ISecurityGroup] = (),
        storage: LustreTarget | None = None,
        mode: SlurmMode = SlurmMode.API_DRIVEN,
        fsx_mount_path: str = DEFAULT_FSX_MOUNT_PATH,
        node_recovery: NodeRecovery = NodeRecovery.AUTOMATIC,
        slurm_config_strategy: SlurmConfigStrategy | None = None,
        role: iam.IRole | None = None,
        runtime_options: Mapping[str, object] | None = None,
        tags: Mapping[str, str] | None = None,
        slurm_cluster_name: str | None = None,
        node_provisioning_mode: NodeProvisioningMode | None = None,
        openzfs: OpenZfsTarget | None = None,
        metrics: MetricsTarget | None = None,
        accept_unconfirmed: Sequence[str] = (),
        deployment: Deployment | None = None,
        suppress: Sequence[Suppression | Mapping[str, str]] = (),
        deployed_roles: Mapping[str, str] | None = None,
        rest_api: SlurmRestApi | None = None,
        login_pool: LoginPool | None = None,
    ) -> None:
        super().__init__(scope, id)
        node_cluster_name = slurm_cluster_name or cluster_name
        placement = node_placement(self, network=network, vpc=vpc, subnets=subnets, security_groups=security_groups)
        sections = {"cluster", "instance_groups", "runtime", "suppress"}
        sections |= {"storage_openzfs"} if openzfs else set()
        sections |= {"network"} if placement.given_vpc else set()
        check_props(
            self,
            "HyperPodCluster",
            sections,
            cluster_name=node_cluster_name if Token.is_unresolved(cluster_name) else cluster_name,
            mode=str(mode),
            slurm_config_strategy=str(slurm_config_strategy or SlurmConfigStrategy.MERGE),
            node_recovery=str(node_recovery),
            given=frozenset({"slurm_config_strategy"} if slurm_config_strategy is not None else ()),
            fsx_mount_path=fsx_mount_path,
            node_provisioning_mode=str(node_provisioning_mode) if node_provisioning_mode else None,
            tags=dict(tags or {}),
            groups=tuple(instance_groups),
            runtime=dict(runtime_options or {}),
            openzfs=openzfs_view(openzfs) if openzfs else None,
            network=placement.view() if placement.given_vpc else None,
            instead_of=["NET-EXISTING"],  # the config's id fields; vpc= objects carry theirs
            paths={"cluster": "", "runtime": "runtime_options", "storage_openzfs": "openzfs", "network": "vpc"},
            accepted=tuple(accept_unconfirmed),
            suppress=tuple(Suppression.of(s) for s in suppress),
        )
        self.cluster_name = cluster_name
        self.mode = SlurmMode(mode)
        self.instance_groups = keep_deployed(self, instance_groups, deployed_roles, role)
        self._connections = placement.connections
        entrypoint = ENTRYPOINT_BY_MODE[self.mode]
        if not lifecycle.has_script(entrypoint):
            raise_if_any(f"HyperPodCluster {self.node.path}", [f"lifecycle: entry script {entrypoint!r} is missing"])

        self.execution_roles: Mapping[str, iam.IRole] = execution_roles(
            self,
            role=role,
            instance_groups=self.instance_groups,
            subnet_ids=placement.subnet_ids,
            security_group_ids=placement.security_group_ids,
            cluster_name=cluster_name,
        )
        """Each instance group's execution role, by the group's name."""
        self.controller_role: iam.IRole = next(
            self.execution_roles[g.name] for g in self.instance_groups if g.role == NodeRole.CONTROLLER
        )
        """The controller group's role: the only one with the scaler's policy and the accounting secret."""
        for node_role in self.node_roles:
            lifecycle.grant_read(node_role)  # every node runs the lifecycle scripts
        grant_volume_keys(self.execution_roles, self.instance_groups)
        options = parse_options(dict(runtime_options or {}))
        grant_runtime_secret(self, self.controller_role, options)  # slurmdbd runs on the controller only
        fsx_dns_name, fsx_mountname, fsx_flag = fsx_keys(
            f"HyperPodCluster {self.node.path}", self.mode, lifecycle, storage
        )
        parameters = with_resources(
            self._deployed_parameters(
                deployment,
                cluster_name=node_cluster_name,
                node_provisioning_mode=node_provisioning_mode,
                fsx_mount_path=fsx_mount_path,
                openzfs=openzfs,
                runtime_options=runtime_options,
            ),
            fsx_dns_name=fsx_dns_name,
            fsx_mountname=fsx_mountname,
            fsx=fsx_flag,
            metrics=metrics,
            rest_api=rest_api.node_parameters() if rest_api is not None else None,
            login_pool=login_pool.node_parameters() if login_pool is not None else None,
        )
        grant_directory_secret(list(self.execution_roles.values()), parameters.directory)
        lifecycle.add_parameters(parameters)
        life_cycle_config = sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
            source_s3_uri=lifecycle.s3_uri,
            on_create=entrypoint if self.mode == SlurmMode.LIFECYCLE_DRIVEN else None,
            on_init_complete=entrypoint if self.mode == SlurmMode.API_DRIVEN else None,
        )
        self.resource = sagemaker.CfnCluster(
            self,
            "Resource",
            cluster_name=cluster_name,
            node_recovery=str(node_recovery),
            node_provisioning_mode=NodeProvisioningMode(node_provisioning_mode).cfn if node_provisioning_mode else None,
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                slurm=sagemaker.CfnCluster.ClusterOrchestratorSlurmConfigProperty(
                    # None with continuous provisioning: the API rejects any strategy there (CL-CONTINUOUS-STRATEGY).
                    slurm_config_strategy=None
                    if node_provisioning_mode == NodeProvisioningMode.CONTINUOUS
                    else str(slurm_config_strategy or SlurmConfigStrategy.MERGE),
                    accounting_database=accounting_database(options.accounting)
                    if parameters.slurmdbd_by_hyperpod  # the node's parameters say the same: one decision
                    else None,
                )
            )
            if self.mode == SlurmMode.API_DRIVEN
            else None,
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                security_group_ids=placement.security_group_ids, subnets=placement.subnet_ids
            ),
            instance_groups=[
                self._instance_group(g, life_cycle_config, storage, fsx_mount_path, openzfs)
                for g in self.instance_groups
            ],
        )
        suppressions = merged((Suppression.of(s) for s in suppress), accept_unconfirmed)
        load_online_rules()  # a suppression may name an online rule
        for key, value in template_metadata(silenced(suppressions, REGISTRY.rules)).items():
            self.resource.add_metadata(key, value)
        for key, value in (tags or {}).items():
            Tags.of(self).add(key, value)
        # Creation must not race what the nodes need at boot: the lifecycle upload, the role's policies (the role
        # and, API-driven, the file systems themselves are implied by the GetAtts of ExecutionRole and the storage
        # configs), the security groups' rules that let nodes mount the file systems (an adopted group's too), and
        # the data repository associations.
        self.resource.node.add_dependency(*lifecycle.upload_dependencies, *self._role_policies(role is None))
        self.rest_api = rest_api
        """Slurm's REST API, or None."""
        if rest_api is not None:  # the controller reads the key at boot: the cluster waits for the grant
            self.resource.node.add_dependency(rest_api.grant_read_key(self.controller_role))
            rest_api.serve(self)
        self.login_pool = login_pool
        """The login pool, or None."""
        if login_pool is not None:  # the login nodes read (and first write) the keys at boot: the cluster waits
            login = login_pool.serve(self)
            self.resource.node.add_dependency(login_pool.grant_host_keys(self.execution_roles[login.name]))
        file_systems = [s for s in (storage, openzfs) if s is not None]
        for file_system in file_systems:
            admit(file_system, self)
        admit_group_security_groups(self, self.instance_groups, file_systems)
        if openzfs is not None:
            self.resource.node.add_dependency(*openzfs.connections.security_groups)
        if storage is not None:
            lifecycle_driven = self.mode == SlurmMode.LIFECYCLE_DRIVEN
            self.resource.node.add_dependency(*storage_dependencies(storage, lifecycle_driven=lifecycle_driven))
        self.scaler_policy = (
            ScalerPolicy(self, "Scaler", role=self.controller_role, cluster_arn=self.cluster_arn)
            if any(g.scaling is not None for g in self.instance_groups)
            else None
        )

    def _deployed_parameters(
        self,
        deployment: Deployment | None,
        *,
        cluster_name: str,
        node_provisioning_mode: NodeProvisioningMode | None,
        fsx_mount_path: str,
        openzfs: OpenZfsTarget | None,
        runtime_options: Mapping[str, object] | None,
    ) -> ProvisioningParameters:
        """The parameters file before the resources' values: the deployment's (the app's path), which must be of
        these props' cluster, else one built from these props (a construct embedded in your own stack)."""
        if deployment is None:
            return parameters_file(
                cluster_name=cluster_name,
                mode=self.mode,
                node_provisioning_mode=node_provisioning_mode,
                groups=[
                    written_group(g.spec(), type_left_to_launch=Token.is_unresolved(g.instance_type))
                    for g in self.instance_groups
                ],
                fsx_mount_path=fsx_mount_path,
                openzfs_mount_path=openzfs.mount_path if openzfs is not None else None,
                runtime_options=runtime_options,
            )
        deployed = (deployment.cluster_name, deployment.mode, deployment.node_provisioning_mode)
        provisioning = NodeProvisioningMode(node_provisioning_mode) if node_provisioning_mode else None
        props = (cluster_name, self.mode, provisioning)
        if deployed != props:
            raise_if_any(
                f"HyperPodCluster {self.node.path}",
                [
                    "deployment: is cluster {!r} in mode {} (node provisioning: {}); these props say {!r} in mode {} "
                    "(node provisioning: {}). Fix: pass the deployment of the config these props come from".format(
                        *deployed, *props
                    )
                ],
            )
        return deployment.parameters

    def grant_mint_token(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` call the REST API's minting URL: it gets tokens for the Slurm user ``rest_api`` maps it to,
        and none if it maps it to none (docs/rest-api.md)."""
        if self.rest_api is None:
            raise_if_any(f"HyperPodCluster {self.node.path}", ["grant_mint_token: the cluster has no rest_api"])
        assert self.rest_api is not None
        return self.rest_api.grant_mint_token(grantee)

    def _role_policies(self, own: bool) -> list[IConstruct]:
        """What of the execution roles the cluster waits for: our own roles' policies (the roles themselves are
        implied by ExecutionRole's GetAtt), or a role you passed, whole (its policies may live anywhere)."""
        if not own:
            return list(self.node_roles)
        return [c for r in self.node_roles for c in r.node.children if isinstance(c, iam.Policy)]

    @property
    def node_roles(self) -> list[iam.IRole]:
        """Every distinct execution role of the cluster, in group order (the controller's first)."""
        return distinct(self.execution_roles)

    def roles_of(self, *kinds: NodeRole) -> list[iam.IRole]:
        """The distinct execution roles of the groups of these kinds, e.g. ``roles_of(NodeRole.COMPUTE,
        NodeRole.LOGIN)`` for what jobs and users read. A group with ``execution_role: controller`` brings the
        controller's role."""
        return distinct({g.name: self.execution_roles[g.name] for g in self.instance_groups if g.role in kinds})

    @property
    def execution_role(self) -> iam.IRole:
        """Deprecated: the controller group's execution role, which every group shared before roles per group.
        Use ``execution_roles`` (by group), ``roles_of(...)`` or ``controller_role``: a grant to this role reaches
        the controller's nodes (and groups with ``execution_role: controller``) only (CHANGELOG, migration)."""
        warnings.warn(
            "HyperPodCluster.execution_role is the controller group's role only since roles per group; use "
            "execution_roles[group], roles_of(NodeRole.COMPUTE, ...) or controller_role",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.controller_role

    @property
    def connections(self) -> ec2.Connections:
        return self._connections

    @property
    def cluster_arn(self) -> str:
        return self.resource.attr_cluster_arn

    @staticmethod
    def from_cluster_attributes(
        scope: Construct, id: str, *, cluster_name: str, cluster_arn: str | None = None
    ) -> ClusterBase:
        """A cluster deployed elsewhere, to grant on (nothing is created or owned).

        :param cluster_name: its name.
        :param cluster_arn: its ARN, ``arn:<partition>:sagemaker:<region>:<account>:cluster/<cluster-id>``
            (``aws sagemaker describe-cluster --cluster-name NAME --query ClusterArn``). IAM authorizes every
            cluster call on this ARN, which ends in the cluster's ID, not its name: an ARN built from the name
            matches nothing. Default: ``cluster/*`` in the stack's account and Region, so the SageMaker actions
            and sessions are granted on every cluster there (the log group stays this name's); give the ARN
            for the one cluster.
        """
        return ImportedCluster(scope, id, cluster_name=cluster_name, cluster_arn=cluster_arn)

    @staticmethod
    def from_cluster_name(scope: Construct, id: str, cluster_name: str) -> ClusterBase:
        """``from_cluster_attributes`` with the name alone: grants on every cluster of the stack's account and
        Region (see there); prefer ``from_cluster_attributes`` with ``cluster_arn``."""
        return ImportedCluster(scope, id, cluster_name=cluster_name)

    def _instance_group(
        self,
        group: InstanceGroup,
        life_cycle_config: sagemaker.CfnCluster.ClusterLifeCycleConfigProperty,
        storage: LustreTarget | None,
        fsx_mount_path: str,
        openzfs: OpenZfsTarget | None,
    ) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        slurm_config, storage_configs = slurm_and_storage(self.mode, group, storage, fsx_mount_path, openzfs)
        return sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=group.name,
            execution_role=self.execution_roles[group.name].role_arn,
            life_cycle_config=life_cycle_config,
            slurm_config=slurm_config,
            instance_storage_configs=storage_configs or None,
            on_start_deep_health_checks=[str(c) for c in group.deep_health_checks] or None,
            **group_api_properties(group),
        )
