"""The deployable composition of the constructs, built from one ClusterConfig.

:class:`TrainingCluster` adds the resources to any stack-like scope (a ``Stack``, or a Service Catalog
``ProductStack``) without a construct of its own in between, so logical IDs are the same wherever it is
used; ``hyperpod_cdk.stacks.cluster_stacks`` holds that composition as a ``Stack`` (deployable or published).
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Annotations, CfnOutput, RemovalPolicy, Stack, Tags, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_cdk.constructs import (
    ClusterNetwork,
    HyperPodCluster,
    LifecycleScripts,
    LustreStorage,
    S3DataRepository,
    secure_bucket,
)
from hyperpod_cdk.constructs.budget import ClusterBudget
from hyperpod_cdk.constructs.checks import stack_region
from hyperpod_cdk.constructs.lifecycle import LifecycleSource
from hyperpod_cdk.constructs.observability import ClusterObservability
from hyperpod_cdk.constructs.openzfs import ImportedOpenZfsFileSystem, OpenZfsStorage, admit_nfs_clients
from hyperpod_cdk.constructs.placement import override_security_groups
from hyperpod_cdk.constructs.published_lifecycle import PublishedLifecycleScripts
from hyperpod_cdk.constructs.storage import (
    ImportedLustreFileSystem,
    admit_lustre_clients,
    associate,
    default_dns_name,
    fsx_version,
)
from hyperpod_cdk.core import stack_outputs as out
from hyperpod_cdk.core.config import (
    ClusterConfig,
    ExistingFileSystemConfig,
    NetworkConfig,
    ObservabilityConfig,
    OpenZfsConfig,
    StorageConfig,
)
from hyperpod_cdk.core.deployment import deployment
from hyperpod_cdk.core.errors import raise_if_any
from hyperpod_cdk.core.merged_values import has_budget, merged_tags
from hyperpod_cdk.core.published_layout import PublishTarget, lifecycle_key_prefix
from hyperpod_cdk.core.suppress import Suppression
from hyperpod_cdk.core.template_parameters import CLUSTER_NAME_ID
from hyperpod_cdk.deployed.scaler_counts import at_template_counts
from hyperpod_cdk.model import pascal_case
from hyperpod_cdk.organization import OrganizationRules
from hyperpod_cdk.stacks.choices import LaunchChoices
from hyperpod_cdk.stacks.login_pool import login_pool_of, login_pool_outputs
from hyperpod_cdk.stacks.rest_api import rest_api_of, rest_outputs
from training_runtime.problems import errors, infos, warnings

PUBLISHED_WORKSPACE = "OBS-PUBLISHED-WORKSPACE"
"""The warning id of a published template that ships no metrics (no ``observability.workspace_arn``)."""


class TrainingCluster:
    """VPC, FSx for Lustre linked to S3, the lifecycle prefix, IAM and the HyperPod cluster, added to ``scope``.

    Not a construct: the resources are ``scope``'s own children (``scope`` is normally a stack), which keeps
    their logical IDs stable. Config warnings become CDK warning annotations on ``scope``. The config's
    ``parameters`` section becomes template parameters (``choices``) whose values replace the config's.

    :param scope: the stack (or ``ProductStack``) that holds the resources.
    :param config: the whole cluster; validated before any construct is built.
    :param published: build a template to publish (``hyperpod-cdk publish``) instead of one to deploy with
        ``cdk deploy``: the lifecycle prefix is content-addressed in this bucket and prefix, uploaded by
        ``publish`` rather than by a CDK BucketDeployment (``config.lifecycle`` is not used), and the new VPC's
        default security group is left to the account baseline rather than closed by a CDK Lambda. Use it in
        a stack whose synthesizer needs no bootstrap (``PublishedTrainingClusterStack`` does both).
        Default: None (a deployable stack).
    :param deployed_counts: each group's count in the deployed cluster (``TargetCount``, read by
        :func:`hyperpod_cdk.deployed.scaler_counts.deployed_counts`): a scaled group's ``InstanceCount`` is that
        count, so an
        update changes none of what the scaler did (docs/scaler-cloudformation.md). Default: None (no cluster
        yet: each scaled group starts at its ``count``).
    :param deployed_roles: each group's ``ExecutionRole`` ARN in the deployed cluster (read by
        :func:`hyperpod_cdk.deployed.roles.deployed_roles`): a deployed group keeps its role, as AWS's guide asks
        (:class:`HyperPodCluster`; docs/execution-roles.md). Default: None (no cluster yet).
    """

    def __init__(
        self,
        scope: Construct,
        *,
        config: ClusterConfig,
        published: PublishTarget | None = None,
        deployed_counts: Mapping[str, int] | None = None,
        deployed_roles: Mapping[str, str] | None = None,
    ) -> None:
        self.scope = scope
        found = config.problems(region=stack_region(Stack.of(scope)))
        raise_if_any(f"cluster configuration of stack {scope.node.id}", errors(found))
        for warning in warnings(found):
            Annotations.of(scope).add_warning_v2(f"hyperpod-cdk:{warning.rule}", str(warning))
        for info in infos(found):
            Annotations.of(scope).add_info(f"{info} [hyperpod-cdk:{info.rule}]")
        self.organization = OrganizationRules.from_config(config.organization) if config.organization else None
        if self.organization is not None:
            # Before any construct: the rules' property injector sees only constructs created after it.
            self.organization.apply(scope)
        # What the nodes get, the prefix and the launch choices applied once; the outputs carry the name
        # HyperPod gets.
        self.deployment = deployment(config, is_unresolved=Token.is_unresolved, region=stack_region(Stack.of(scope)))
        config = self.deployment.config
        self.config = config
        if self.deployment.parameters.prices:  # `cdk synth` says each price the partitions bill and its source
            currency = config.cost.currency if config.cost else "USD"
            listed = "; ".join(
                f"{t} {p.per_hour:g} {currency}/h ({p.source})"
                for t, p in sorted(self.deployment.parameters.prices.items())
            )
            Annotations.of(scope).add_info(f"hyperpod-cdk: prices as Slurm billing: {listed}")
        self.published = published
        self.choices = LaunchChoices(self.scope, config)
        if self.organization is not None:
            self.organization.constrain_name_parameter(self.choices.parameters.get(CLUSTER_NAME_ID))
        self.network = self._network(config.network)
        self.data_buckets: dict[str, s3.IBucket] = {}
        self._imported_associations: list[fsx.CfnDataRepositoryAssociation] = []
        self.storage = self._storage(config.storage) if config.storage else None
        self.openzfs = self._openzfs(config.storage_openzfs) if config.storage_openzfs else None
        self.lifecycle = self._lifecycle()
        self.lifecycle.add_users(self.deployment.users)
        self.observability = self._observability(config.observability)
        self.rest_api = rest_api_of(
            self.scope,
            config,
            self.network,
            published=self.published is not None,
            source=f"cluster configuration of stack {scope.node.id}",
        )
        self.login_pool = login_pool_of(
            self.scope,
            config,
            self.network,
            published=self.published is not None,
            source=f"cluster configuration of stack {scope.node.id}",
        )
        self.cluster = HyperPodCluster(
            self.scope,
            "Cluster",
            cluster_name=self.choices.cluster_name,
            slurm_cluster_name=config.cluster_name,
            network=self.network,
            lifecycle=self.lifecycle,
            storage=self.storage,
            openzfs=self.openzfs,
            instance_groups=at_template_counts(
                self.choices.instance_groups(), deployed_counts, f"cluster configuration of stack {scope.node.id}"
            ),
            mode=config.mode,
            fsx_mount_path=config.fsx_mount_path,
            node_recovery=config.node_recovery,
            node_provisioning_mode=config.node_provisioning_mode,
            slurm_config_strategy=config.slurm_config_strategy
            if "slurm_config_strategy" in config.model_fields_set
            else None,
            runtime_options=config.runtime,
            metrics=self.observability.metrics_target if self.observability else None,
            accept_unconfirmed=config.accept_unconfirmed,
            suppress=[Suppression.of(s) for s in config.suppress],
            deployment=self.deployment,
            deployed_roles=deployed_roles,
            rest_api=self.rest_api,
            login_pool=self.login_pool,
        )
        self._admit_to_imports()
        if self.observability is not None:
            self.observability.watch(self.cluster)
        self.choices.choose_capacity(self.cluster.resource)
        # Every resource's tags, as the request validate checks has them (the organization's were added by its rules
        # already, the cost tag is the budget's too: adding the same value again changes nothing).
        budget_name = config.cluster_name if has_budget(config.cost, config.observability) else None
        for key, tag in merged_tags(config.tags, config.organization, budget_name).items():
            Tags.of(self.scope).add(key, tag.value)
        self.budget = self._budget(config)
        self._outputs()

    def _budget(self, config: ClusterConfig) -> ClusterBudget | None:
        """``cost.aws_budget``: a monthly AWS budget on the cluster's tagged resources, alerting the alarm topic
        (rule COST-BUDGET-TOPIC makes sure there is one)."""
        wanted = config.cost.aws_budget if config.cost else None
        topic = self.observability.topic if self.observability else None
        if not has_budget(config.cost, config.observability) or wanted is None or topic is None or config.cost is None:
            return None
        return ClusterBudget(
            self.scope,
            "Budget",
            cluster_name=config.cluster_name,
            monthly=wanted.monthly,
            currency=config.cost.currency,
            alert_percent=wanted.alert_percent,
            topic=topic,
            topic_key=self.observability.topic_key if self.observability else None,
        )

    def _admit_to_imports(self) -> None:
        """An adopted file system's security group gets the rules that admit the nodes and the groups in their own
        security groups, as the config promises (``storage.existing.security_group_id``); the unowned import and
        the cluster add none. The cluster waits for them, and for the associations, as for its own."""
        clients: list[ec2.IConnectable] = [self.network, *override_security_groups(self.cluster)]
        for client in clients:
            if isinstance(self.storage, ImportedLustreFileSystem):
                admit_lustre_clients(self.storage.connections, client, efa=False)
            if isinstance(self.openzfs, ImportedOpenZfsFileSystem):
                admit_nfs_clients(self.openzfs.connections, client)
        self.cluster.resource.node.add_dependency(*self._imported_associations)

    def _lifecycle(self) -> LifecycleSource:
        config = self.config
        if self.published is None:
            return LifecycleScripts(
                self.scope,
                "LifecycleScripts",
                bucket=s3.Bucket.from_bucket_name(self.scope, "ImportedLifecycleBucket", config.lifecycle.bucket_name)
                if config.lifecycle.bucket_name
                else None,
                prefix=config.lifecycle.prefix,
            )
        if config.lifecycle.model_fields_set:
            Annotations.of(self.scope).add_warning_v2(
                "hyperpod-cdk:published-lifecycle",
                f"lifecycle: not used by a published template; its scripts live under s3://"
                f"{self.published.bucket_name}/{lifecycle_key_prefix(self.published.prefix, '<hash>')}. Fix: remove "
                "the section",
            )
        return PublishedLifecycleScripts(
            self.scope,
            "LifecycleScripts",
            bucket_name=self.published.bucket_name,
            prefix=self.published.prefix,
            bucket_owner=self.published.bucket_owner,
        )

    def _observability(self, obs: ObservabilityConfig) -> ClusterObservability | None:
        """The workspace, Grafana and alarms. A published template's nodes cannot learn a workspace created at
        launch (their parameters file is fixed at publish): without ``workspace_arn`` it ships no metrics, with
        a warning (OBS-PUBLISHED-WORKSPACE), and keeps the alarms."""
        if not obs.enabled:
            return None
        metrics = True
        if self.published is not None and obs.workspace_arn is None:
            where = "observability.workspace_arn"
            if obs.grafana:
                raise_if_any(
                    f"cluster configuration of stack {self.scope.node.id}",
                    [
                        "observability.grafana: a published template without workspace_arn has no workspace for "
                        "Grafana to read. Fix: set observability.workspace_arn to the platform's workspace, or "
                        "grafana: false"
                    ],
                )
            Annotations.of(self.scope).add_warning_v2(
                f"hyperpod-cdk:{PUBLISHED_WORKSPACE}",
                f"{where}: not set, so a published template's nodes ship no metrics (their parameters file is "
                "fixed at publish; a workspace created at launch has an ID only known then). The alarms remain. "
                "Fix: set observability.workspace_arn to an existing workspace (the platform's), or "
                "observability.enabled: false",
            )
            metrics = False
        return ClusterObservability(
            self.scope,
            "Observability",
            cluster_name=self.config.cluster_name,
            metrics=metrics,
            workspace_arn=obs.workspace_arn,
            grafana=obs.grafana,
            alarms=obs.alarms.enabled,
            emails=obs.alarms.emails,
        )

    def _network(self, net: NetworkConfig) -> ClusterNetwork:
        if net.vpc_id is None:
            return ClusterNetwork(
                self.scope,
                "Network",
                availability_zone=net.availability_zone,
                cidr=net.cidr,
                private_subnet_cidr_mask=net.private_subnet_cidr_mask,
                flow_logs=net.flow_logs,
                allow_internet_egress=net.allow_internet_egress,
                restrict_default_security_group=self.published is None,
            )
        assert net.subnet_id and net.availability_zone  # ClusterConfig.problems() guarantees it
        vpc = ec2.Vpc.from_vpc_attributes(
            self.scope,
            "ImportedVpc",
            vpc_id=net.vpc_id,
            availability_zones=[net.availability_zone],
            private_subnet_ids=[net.subnet_id],
        )
        return ClusterNetwork(
            self.scope,
            "Network",
            vpc=vpc,
            subnet=ec2.Subnet.from_subnet_attributes(
                self.scope, "ImportedSubnet", subnet_id=net.subnet_id, availability_zone=net.availability_zone
            ),
            security_group=ec2.SecurityGroup.from_security_group_id(
                self.scope, "ImportedNodeSecurityGroup", net.security_group_id
            )
            if net.security_group_id
            else None,
            allow_internet_egress=net.allow_internet_egress,
        )

    def _storage(self, storage: StorageConfig) -> LustreStorage | ImportedLustreFileSystem:
        removal = RemovalPolicy.RETAIN if storage.removal_policy == "retain" else RemovalPolicy.DESTROY
        repositories = []
        for repo in storage.data_repositories:
            bucket_name = self.choices.bucket_name(repo)
            bucket = (
                s3.Bucket.from_bucket_name(self.scope, f"ImportedDataBucket{pascal_case(repo.name)}", bucket_name)
                if bucket_name
                else secure_bucket(self.scope, f"DataBucket{pascal_case(repo.name)}", removal_policy=removal)
            )
            self.data_buckets[repo.name] = bucket
            repositories.append(
                S3DataRepository(
                    name=repo.name,
                    bucket=bucket,
                    file_system_path=repo.file_system_path,
                    bucket_prefix=self.choices.bucket_prefix(repo),
                    auto_import_events=repo.auto_import_events,
                    auto_export_events=repo.auto_export_events,
                    batch_import_metadata_on_create=repo.batch_import_metadata_on_create,
                    imported_file_chunk_size_mib=repo.imported_file_chunk_size_mib,
                )
            )
        existing = storage.existing
        if existing is not None:
            return self._imported_storage(existing, repositories)
        return LustreStorage(
            self.scope,
            "Storage",
            network=self.network,
            storage_capacity_gib=self.choices.storage_capacity_gib(storage.storage_capacity_gib),
            deployment_type=fsx.LustreDeploymentType[storage.deployment_type],
            throughput_mb_per_tib=storage.throughput_mb_per_tib,
            data_compression=fsx.LustreDataCompressionType[storage.data_compression],
            file_system_type_version=fsx_version(storage.file_system_type_version),
            efa_enabled=storage.efa_enabled,
            metadata_iops=storage.metadata_iops,
            data_repositories=repositories,
            removal_policy=removal,
        )

    def _imported_storage(
        self, existing: ExistingFileSystemConfig, repositories: list[S3DataRepository]
    ) -> ImportedLustreFileSystem:
        """``storage.existing``: the unowned import (:meth:`_admit_to_imports` adds the nodes' Lustre rules to its
        security group, the config's promise) and the data repository associations it names, in its scope."""
        storage = LustreStorage.from_lustre_attributes(
            self.scope,
            "Storage",
            file_system_id=existing.file_system_id,
            mount_name=existing.mount_name,
            dns_name=existing.dns_name or default_dns_name(existing.file_system_id),
            security_group=ec2.SecurityGroup.from_security_group_id(
                self.scope, "ImportedStorageSecurityGroup", existing.security_group_id
            ),
        )
        self._imported_associations = [associate(storage, r, storage.file_system_id) for r in repositories]
        return storage

    def _openzfs(self, openzfs: OpenZfsConfig) -> OpenZfsStorage | ImportedOpenZfsFileSystem:
        existing = openzfs.existing
        if existing is not None:
            # The unowned import: _admit_to_imports adds the nodes' NFS rules to its group (the config's promise).
            imported = OpenZfsStorage.from_open_zfs_attributes(
                self.scope,
                "OpenZfs",
                file_system_id=existing.file_system_id,
                dns_name=existing.dns_name,
                security_group=ec2.SecurityGroup.from_security_group_id(
                    self.scope, "ImportedOpenZfsSecurityGroup", existing.security_group_id
                ),
                mount_path=openzfs.mount_path,
            )
            return imported
        standby = openzfs.standby_subnet_id
        return OpenZfsStorage(
            self.scope,
            "OpenZfs",
            network=self.network,
            mount_path=openzfs.mount_path,
            storage_capacity_gib=openzfs.storage_capacity_gib,
            deployment_type=openzfs.deployment_type,
            throughput_capacity_mbps=openzfs.throughput_capacity_mbps,
            data_compression=openzfs.data_compression,
            automatic_backup_retention_days=openzfs.automatic_backup_retention_days,
            copy_tags_to_backups=openzfs.copy_tags_to_backups,
            standby_subnet=ec2.Subnet.from_subnet_id(self.scope, "ImportedOpenZfsStandbySubnet", standby)
            if standby
            else None,
            route_table_ids=openzfs.route_table_ids,
            client_cidrs=openzfs.client_cidrs,
            removal_policy=RemovalPolicy.RETAIN if openzfs.removal_policy == "retain" else RemovalPolicy.DESTROY,
        )

    def _outputs(self) -> None:
        cluster = self.cluster
        outputs: dict[str, tuple[str, str]] = {
            out.CLUSTER_NAME: (cluster.cluster_name, "HyperPod cluster name"),
            out.CLUSTER_ARN: (cluster.cluster_arn, "HyperPod cluster ARN"),
            out.SSM_TARGET_PREFIX: (
                cluster.ssm_target_prefix,
                "aws ssm start-session --target <this><instance-group>-<instance-id>",
            ),
            out.LIFECYCLE_BUCKET: (self.lifecycle.bucket.bucket_name, "Bucket of the lifecycle scripts"),
            out.LIFECYCLE_PREFIX: (self.lifecycle.prefix, "Key prefix of the lifecycle scripts"),
            out.TRAINING_JOB_SUBNETS: (
                self.network.subnet_id,
                "Subnets for SageMaker training jobs that use this VPC and file system (VpcConfig.Subnets)",
            ),
            out.TRAINING_JOB_SECURITY_GROUPS: (
                self.network.security_group.security_group_id,
                "Security groups for SageMaker training jobs (VpcConfig.SecurityGroupIds)",
            ),
        }
        if self.storage is not None:
            outputs[out.FSX_FILE_SYSTEM_ID] = (self.storage.file_system_id, "FSx for Lustre file system ID")
            outputs[out.FSX_DNS_NAME] = (self.storage.dns_name, "FSx for Lustre DNS name")
            outputs[out.FSX_MOUNT_NAME] = (self.storage.mount_name, "FSx for Lustre mount name")
        if self.openzfs is not None:
            outputs[out.OPENZFS_FILE_SYSTEM_ID] = (self.openzfs.file_system_id, "FSx for OpenZFS file system ID")
            outputs[out.OPENZFS_DNS_NAME] = (self.openzfs.dns_name, "FSx for OpenZFS DNS name")
        for name, bucket in self.data_buckets.items():
            outputs[out.data_repository_bucket(pascal_case(name))] = (
                bucket.bucket_name,
                f"S3 bucket of data repository {name}",
            )
        outputs.update(self._observability_outputs())
        outputs.update(rest_outputs(self.rest_api))
        outputs.update(login_pool_outputs(self.login_pool))
        for key, (value, description) in outputs.items():
            CfnOutput(self.scope, key, value=value, description=description)

    def _observability_outputs(self) -> dict[str, tuple[str, str]]:
        obs = self.observability
        if obs is None:
            return {}
        found = {
            out.PROMETHEUS_WORKSPACE_ID: (obs.workspace_id, "Amazon Managed Service for Prometheus workspace ID"),
            out.PROMETHEUS_REMOTE_WRITE_URL: (
                obs.metrics_target.remote_write_url if obs.metrics_target else None,
                "Where the nodes remote-write their metrics (SigV4, service aps)",
            ),
            out.PROMETHEUS_QUERY_URL: (obs.query_url, "Prometheus query API of the workspace (SigV4, service aps)"),
            out.GRAFANA_URL: (obs.grafana_url, "Amazon Managed Grafana workspace (sign in with IAM Identity Center)"),
            out.ALARM_TOPIC_ARN: (obs.topic.topic_arn if obs.topic else None, "SNS topic of the cluster's alarms"),
        }
        return {key: (value, text) for key, (value, text) in found.items() if value is not None}
