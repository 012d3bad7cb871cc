"""The cluster configuration file (YAML or JSON): the same names as the constructs' props.

``hyperpod-cdk schema`` prints its JSON Schema (committed as schema/cluster-config.schema.json for
editors); ``hyperpod-cdk validate FILE`` checks a file offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hyperpod_cdk.core.config_file import read_config_file
from hyperpod_cdk.core.errors import ConfigurationError, raise_if_any
from hyperpod_cdk.core.login_pool_config import LoginPoolConfig
from hyperpod_cdk.core.rest_api_config import RestApiConfig
from hyperpod_cdk.core.suppress import Suppressed
from hyperpod_cdk.model import (
    ALL_EVENTS,
    DEFAULT_FSX_MOUNT_PATH,
    DEFAULT_LIFECYCLE_PREFIX,
    Capacity,
    DataRepositoryEvent,
    InstanceGroup,
    NodeProvisioningMode,
    NodeRecovery,
    NodeRole,
    SlurmConfigStrategy,
    SlurmMode,
)
from training_runtime.directory import Directory, parse_directory
from training_runtime.problems import Problem, errors, warnings
from training_runtime.team_model import Teams
from training_runtime.teams import parse_teams
from training_runtime.users import User, parse_users


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class NetworkConfig(_Model):
    """A new single-AZ VPC (default), or an existing VPC and subnet (``vpc_id`` + ``subnet_id``)."""

    cidr: str = "10.0.0.0/16"
    """CIDR of a new VPC."""
    availability_zone: str | None = None
    """AZ of the nodes' subnet. New VPC: default the region's first AZ. Existing subnet: required."""
    private_subnet_cidr_mask: int = 17
    """Prefix length of a new VPC's node subnet (EFA instances take many addresses)."""
    flow_logs: bool = True
    """Send a new VPC's flow logs to CloudWatch Logs."""
    allow_internet_egress: bool = True
    """Let nodes reach the internet through the NAT gateway (AWS endpoints, package mirrors)."""
    vpc_id: str | None = None
    """Existing VPC to use instead of a new one."""
    subnet_id: str | None = None
    """Existing subnet for the nodes (with vpc_id)."""
    security_group_id: str | None = None
    """Existing security group for the nodes; must allow all traffic to and from itself."""


class DataRepositoryConfig(_Model):
    """A file-system directory linked to S3 by a data repository association."""

    name: str
    """Stable name; logical IDs derive from it."""
    file_system_path: str
    """Directory in the file system, e.g. /datasets."""
    bucket_name: str | None = None
    """Existing bucket. Default: a new private, encrypted, retained bucket."""
    bucket_prefix: str = ""
    """Key prefix in the bucket. Default: the whole bucket."""
    auto_import_events: list[DataRepositoryEvent] = Field(default_factory=lambda: list(ALL_EVENTS))
    """S3 changes imported automatically."""
    auto_export_events: list[DataRepositoryEvent] = Field(default_factory=lambda: list(ALL_EVENTS))
    """File-system changes exported to S3 automatically."""
    batch_import_metadata_on_create: bool = False
    imported_file_chunk_size_mib: int | None = None


class ExistingFileSystemConfig(_Model):
    """An FSx for Lustre file system created elsewhere (e.g. shared with another cluster)."""

    file_system_id: str
    mount_name: str
    security_group_id: str
    """The file system's security group; the cluster's Lustre rules are added to it."""
    dns_name: str | None = None
    """Default: <file_system_id>.fsx.<region>.amazonaws.com."""
    shared: bool = False
    """Another cluster uses this file system too: this cluster keeps the runtime's state in
    ``<mount>/.hyperpod-cdk/clusters/<cluster>`` and (homes on Lustre) its users' homes in
    ``<mount>/home/.clusters/<cluster>``. False: ``<mount>/.hyperpod-cdk`` and ``<mount>/home``, marked as this
    cluster's (a node of another cluster finding the mark refuses to boot)."""


class StorageConfig(_Model):
    """FSx for Lustre mounted on every node."""

    storage_capacity_gib: int = 1200
    deployment_type: Literal["SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"] = "PERSISTENT_2"
    throughput_mb_per_tib: int | None = None
    """Per-unit storage throughput of PERSISTENT types: 125, 250, 500 or 1000 for PERSISTENT_2 (default 250);
    none for SCRATCH types."""
    data_compression: Literal["NONE", "LZ4"] = "LZ4"
    file_system_type_version: Literal["2.10", "2.12", "2.15"] = "2.15"

    @field_validator("file_system_type_version", mode="before")
    @classmethod
    def _version_as_text(cls, value: Any) -> Any:
        """YAML reads an unquoted 2.10 as the number 2.1: take numbers as the version they spell."""
        return f"{value:.2f}" if isinstance(value, float) else value

    efa_enabled: bool = False
    """Serve Lustre over EFA (PERSISTENT_2; GPU instances with EFA)."""
    metadata_iops: int | None = None
    """Provisioned metadata IOPS. Default: automatic metadata scaling."""
    removal_policy: Literal["retain", "destroy"] = "retain"
    """What happens to the file system and new data buckets when they leave the stack."""
    data_repositories: list[DataRepositoryConfig] = Field(default_factory=list)
    existing: ExistingFileSystemConfig | None = None
    """Adopt this file system instead of creating one."""


class ExistingOpenZfsConfig(_Model):
    """An FSx for OpenZFS file system created elsewhere."""

    file_system_id: str
    """Its fs- ID."""
    dns_name: str
    """Its DNS name, fs-<id>.fsx.<region>.amazonaws.com (HyperPod mounts it by this name)."""
    security_group_id: str
    """The file system's security group; the nodes are admitted to it on the NFS ports."""
    shared: bool = False
    """Another cluster keeps its homes on this file system too: this cluster's users' homes are
    ``<mount_path>/.clusters/<cluster>/<user>`` (and the runtime's state on Lustre is per cluster too)."""


OpenZfsDeploymentType = Literal["SINGLE_AZ_1", "SINGLE_AZ_2", "SINGLE_AZ_HA_1", "SINGLE_AZ_HA_2", "MULTI_AZ_1"]
"""FSx for OpenZFS deployment types (FSx CreateFileSystemOpenZFSConfiguration: DeploymentType)."""


class OpenZfsConfig(_Model):
    """FSx for OpenZFS that HyperPod mounts on every node over NFS (API-driven mode): a new file system (default)
    or an adopted one (``existing``)."""

    mount_path: str = "/home"
    """Where the nodes mount it; not the Lustre mount path. At /home (or wherever it is), users' homes live on it."""
    storage_capacity_gib: int = 256
    """SSD capacity of a new file system: 64 to 524288 GiB."""
    deployment_type: OpenZfsDeploymentType = "SINGLE_AZ_1"
    """SINGLE_AZ_1 / SINGLE_AZ_HA_1 (64-4096 MB/s), SINGLE_AZ_2 / SINGLE_AZ_HA_2 / MULTI_AZ_1 (160-10240 MB/s)."""
    throughput_capacity_mbps: int | None = None
    """Throughput in MB/s, one of the deployment type's tiers. Default: the type's smallest (64 or 160)."""
    data_compression: Literal["NONE", "ZSTD", "LZ4"] = "LZ4"
    """Compression of the root volume."""
    automatic_backup_retention_days: int = 7
    """Daily automatic backups kept this many days (0 turns them off; at most 90)."""
    copy_tags_to_backups: bool = True
    """Copy the file system's tags to its backups, volumes and snapshots."""
    standby_subnet_id: str | None = None
    """MULTI_AZ_1 only, required there: the standby file server's subnet, in another AZ of the existing VPC
    (the nodes' subnet is the preferred one)."""
    route_table_ids: list[str] = Field(default_factory=list)
    """MULTI_AZ_1 only: the route tables of the nodes' subnets, where FSx adds the route to the file server.
    Default: the VPC's main route table."""
    client_cidrs: list[str] | None = None
    """CIDRs the root volume is exported to over NFS. Default: the nodes' subnet (a new VPC); required with an
    existing VPC or with groups in other subnets (override_vpc)."""
    removal_policy: Literal["retain", "destroy"] = "retain"
    """What happens to a new file system (and its security group) when it leaves the stack."""
    existing: ExistingOpenZfsConfig | None = None
    """Adopt this file system instead of creating one (then only mount_path applies)."""


class LifecycleConfig(_Model):
    bucket_name: str | None = None
    """Existing bucket for the lifecycle scripts. Default: a new private bucket."""
    prefix: str = DEFAULT_LIFECYCLE_PREFIX
    """Key prefix of the scripts (replaced on every deploy)."""


class OrganizationConfig(_Model):
    """A platform team's rules, applied to every resource of the stack (docs/organization.md)."""

    permission_boundary_arn: str | None = None
    """Managed policy set as the permission boundary of every IAM role (CDK's own roles included)."""
    required_tags: dict[str, str | None] = Field(default_factory=dict)
    """Tags every taggable resource must carry: a value applies the tag; null means ``tags`` must set it."""
    name_prefix: str | None = None
    """Prefix of every physical name the stack sets (the HyperPod cluster name among them)."""
    kms_key_arn: str | None = None
    """Customer-managed key for new buckets, the file system (PERSISTENT types), log groups and node volumes
    (with continuous node provisioning only). Its key policy must let CloudWatch Logs use it (docs/organization.md)."""
    access_logs_bucket: str | None = None
    """Existing bucket that receives every new bucket's S3 server access logs."""
    access_logs_prefix: str = ""
    """Key prefix of the access logs in that bucket."""


class AlarmsConfig(_Model):
    """Notifications a platform team expects (docs/observability.md, "Alarms")."""

    enabled: bool = True
    """Create the alarm topic (SNS, KMS-encrypted, TLS only), the HyperPod event rules, the CloudWatch alarms and
    the Prometheus alert rules."""
    emails: list[str] = Field(default_factory=list)
    """Addresses subscribed to the alarm topic (each confirms the subscription by mail). Default: none."""


class ObservabilityConfig(_Model):
    """Where the nodes' metrics go and the AWS resources that watch the cluster (docs/observability.md)."""

    enabled: bool = True
    """Ship every node's metrics to Amazon Managed Service for Prometheus and create the alarms."""
    workspace_arn: str | None = None
    """An existing Prometheus workspace (``arn:aws:aps:<region>:<account>:workspace/<id>``). Default: a new
    workspace for this cluster. A published template needs one (its nodes' parameters are fixed at publish)."""
    grafana: bool = False
    """Create an Amazon Managed Grafana workspace that reads the Prometheus workspace (sign-in through IAM
    Identity Center, which must be enabled in the account)."""
    alarms: AlarmsConfig = Field(default_factory=AlarmsConfig)
    """Alarm topic, event rules, CloudWatch alarms and Prometheus alert rules."""


class PriceOverride(_Model):
    """Your rate for an instance type where it differs from the on-demand price (training plan, savings plan, Spot)."""

    per_hour: float
    """The price per instance-hour in ``cost.currency``."""
    source: str
    """Where the rate comes from (``savings plan SP-123, 2026``); shown with the price in synth output and docs."""


class AwsBudgetConfig(_Model):
    """An AWS Budgets cost budget for the whole cluster (every resource carrying the cluster's cost tag)."""

    monthly: float
    """The monthly budget in ``cost.currency``."""
    alert_percent: list[float] = Field(default_factory=lambda: [80.0, 100.0])
    """Actual spend above these percentages of ``monthly`` notifies the cluster's alarm topic."""


class CostConfig(_Model):
    """Prices as Slurm billing (each partition's TRESBillingWeights) and an optional AWS budget; docs/cost.md."""

    currency: str = "USD"
    """The currency of the prices and budgets: the Price List's (USD)."""
    prices: dict[str, PriceOverride] = Field(default_factory=dict)
    """Per instance type, your rate instead of the on-demand price. Default: none (snapshot or Price List)."""
    aws_budget: AwsBudgetConfig | None = None
    """A monthly AWS Budgets budget for the cluster, alerting the cluster's alarm topic. Default: none."""


class CountRange(_Model):
    """The instance counts a launching team may choose: a CloudFormation Number with MinValue and MaxValue."""

    min: int
    """Fewest instances (MinValue)."""
    max: int
    """Most instances (MaxValue); the subnet and HyperPod's limits must hold at this count."""


class GroupParameters(_Model):
    """What a launching team may choose for one instance group."""

    count: CountRange | None = None
    """A range of instance counts; the default is the group's ``count``."""
    instance_types: list[str] | None = None
    """Allowed instance types (AllowedValues); the group's ``instance_type`` is the default and must be one.
    The nodes then read their type from HyperPod's resource_config.json."""
    capacity: list[Capacity] | None = None
    """Allowed capacities, spot and/or on-demand (AllowedValues); the group's ``capacity`` is the default and
    must be one. The template writes ``CapacityRequirements`` from the chosen value."""


class DataRepositoryParameters(_Model):
    """What a launching team may choose for a data repository whose bucket exists (``bucket_name`` set)."""

    bucket_name: bool | list[str] = False
    """The bucket becomes a parameter; default: ``bucket_name``. ``true``: any name that starts with
    ``bucket_name_prefix`` (required) and follows S3's naming rules (AllowedPattern); a list: exactly those buckets
    (AllowedValues), ``bucket_name`` among them. Never any bucket of the account: its objects become readable by
    every cluster user (``PAR-BUCKET-SCOPE``)."""
    bucket_name_prefix: str | None = None
    """With ``bucket_name: true``: the start every chosen bucket's name must have, e.g. the team's ``team-a-``."""
    bucket_prefix: bool = False
    """The key prefix becomes a parameter: empty or segments ending in '/'; default: ``bucket_prefix``."""


class ParametersConfig(_Model):
    """The choices a team makes when it launches a published template: CloudFormation parameters whose
    constraints come from the same rules as validation. Everything else is fixed at synth."""

    cluster_name: bool = False
    """The cluster name becomes a parameter (default: ``cluster_name``). The nodes keep ``cluster_name`` as
    the Slurm cluster name: their parameters file is fixed when the template is built."""
    instance_groups: dict[str, GroupParameters] = Field(default_factory=dict)
    """Per instance-group name: its count range, allowed instance types and allowed capacities."""
    storage_capacity_gib: list[int] | None = None
    """Allowed FSx capacities (AllowedValues) of a new file system; ``storage.storage_capacity_gib`` is the
    default and must be one."""
    data_repositories: dict[str, DataRepositoryParameters] = Field(default_factory=dict)
    """Per data-repository name: whether its bucket name and prefix are parameters."""


class SuppressionConfig(_Model):
    """One rule silenced, and why (docs/rules.md, "Levels and suppression")."""

    rule: str
    """A rule id (docs/rules.md): a warning, an info, or an error marked as hyperpod-cdk's own opinion."""
    reason: str
    """Why its finding does not apply here; written into the template's metadata."""


def _default_groups() -> list[InstanceGroup]:
    return [
        InstanceGroup(name="controller", role=NodeRole.CONTROLLER, instance_type="ml.m5.xlarge", count=1),
        InstanceGroup(name="workers", role=NodeRole.COMPUTE, instance_type="ml.trn1.32xlarge", count=4),
    ]


def _default_storage() -> StorageConfig:
    return StorageConfig(data_repositories=[DataRepositoryConfig(name="data", file_system_path="/data")])


class ClusterConfig(_Model):
    """A whole HyperPod Slurm training cluster. Every field has a default: ``{}`` is a valid file."""

    cluster_name: str = "ml-cluster"
    mode: SlurmMode = SlurmMode.API_DRIVEN
    """api-driven (HyperPod configures Slurm; recommended by AWS) or lifecycle-driven (our runtime does)."""
    node_recovery: NodeRecovery = NodeRecovery.AUTOMATIC
    slurm_config_strategy: SlurmConfigStrategy = SlurmConfigStrategy.MERGE
    """How HyperPod treats slurm.conf on UpdateCluster (api-driven mode without continuous provisioning). Default:
    Merge, which AWS's migration guide asks for if the cluster may later move to continuous provisioning (another
    strategy warns, CL-STRATEGY-MERGE; sagemaker-hyperpod-ref gives Managed as the API's own default)."""
    node_provisioning_mode: NodeProvisioningMode | None = None
    """continuous: HyperPod accepts partial capacity and retries worker launches in the background
    (``NodeProvisioningMode: Continuous``; new clusters only). Default: none, HyperPod's all-or-nothing model."""
    fsx_mount_path: str = DEFAULT_FSX_MOUNT_PATH
    instance_groups: list[InstanceGroup] = Field(default_factory=_default_groups)
    """One controller group, at most one login group, one or more compute groups."""
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    storage: StorageConfig | None = Field(default_factory=_default_storage)
    """FSx for Lustre; null for none. Default: 1.2 TiB PERSISTENT_2 linked to a new data bucket at /data."""
    storage_openzfs: OpenZfsConfig | None = None
    """FSx for OpenZFS mounted by HyperPod beside (or instead of) Lustre, e.g. homes on OpenZFS and data on
    Lustre. API-driven mode only. Default: none."""
    lifecycle: LifecycleConfig = Field(default_factory=LifecycleConfig)
    tags: dict[str, str] = Field(default_factory=dict)
    """Tags on every resource of the stack."""
    runtime: dict[str, Any] = Field(default_factory=dict)
    """Options for the node runtime (Slurm timeouts, accounting, PyTorch environment); see
    docs/configuration.md. Checked by the runtime's own rules, passed through the parameters file."""
    users: list[dict[str, Any]] = Field(default_factory=list)
    """Cluster users: name, uid, gid (default uid), shell, sudo, ssh_public_keys. Homes live on FSx."""
    enforce_accounts: bool = False
    """Slurm refuses jobs of users in no team and enforces the teams' QOS limits and budgets
    (``AccountingStorageEnforce=associations,limits,qos,safe``). Default: off, Slurm's default."""
    teams: list[dict[str, Any]] = Field(default_factory=list)
    """Slurm accounts: name, users (from ``users``), directory_group, default_for, fairshare, qos {max_nodes,
    max_wall, priority}, budget {amount, period}. The controller applies them with sacctmgr (docs/cost.md) and keeps
    a directory group's members in step (docs/directory.md). Default: none."""
    directory: dict[str, Any] | None = None
    """The organization's LDAP directory (OpenLDAP, AWS Managed Microsoft AD): every node resolves its users and
    groups through SSSD, with the directory's UIDs (docs/directory.md). Checked by the runtime's own rules, passed
    through the parameters file (the bind password's secret ARN, never the password). Default: none."""
    parameters: ParametersConfig | None = None
    """Choices left to the team that launches the template (CloudFormation parameters). Default: none, every
    value is fixed at synth."""
    organization: OrganizationConfig | None = None
    """A platform team's rules (permission boundary, required tags, name prefix, KMS key, access logs). Default:
    none, and the template is exactly as without them."""
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    """Metrics to Amazon Managed Service for Prometheus, optional Grafana, alarms. Default: on, with a new
    workspace; ``observability: {enabled: false}`` for none."""
    suppress: list[SuppressionConfig] = Field(default_factory=list)
    """Rules silenced, each with a reason: their findings are not reported (``validate --show-suppressed`` lists
    them), and the cluster resource's metadata records them and tells cfn-lint to skip the matching rule. An error
    the AWS API raises cannot be suppressed (CL-SUPPRESS). Default: none."""
    cost: CostConfig | None = None
    """Prices as Slurm billing, so Slurm's accounting is in money, and an AWS budget (docs/cost.md). Default: none,
    and partitions bill Slurm's default (allocated CPUs)."""
    rest_api: RestApiConfig | None = None
    """Slurm's REST API over HTTPS through an internal load balancer, with short-lived tokens an IAM identity gets
    from a minting function (docs/rest-api.md). Default: none."""
    login_pool: LoginPoolConfig | None = None
    """The login group's nodes behind one Network Load Balancer (SSH, internal by default) with one set of SSH host
    keys kept in Secrets Manager, so users reach any login node by one name without a host-key warning
    (docs/login-pool.md). Needs a login group. Default: none."""
    accept_unconfirmed: list[str] = Field(default_factory=list)
    """The former form of ``suppress`` (still read): rule ids of settings whose Slurm support AWS has not confirmed
    that you have checked, each suppressed with the reason "checked: unconfirmed Slurm support accepted"."""

    def cluster_users(self) -> list[User]:
        return parse_users(self.users)

    @property
    def shares_file_system(self) -> bool:
        """Another cluster uses this cluster's Lustre or OpenZFS file system (``existing.shared``): the runtime's
        state and the homes are this cluster's own directories on it."""
        lustre = self.storage.existing if self.storage is not None else None
        zfs = self.storage_openzfs.existing if self.storage_openzfs is not None else None
        return bool((lustre is not None and lustre.shared) or (zfs is not None and zfs.shared))

    def cluster_teams(self) -> Teams | None:
        """The teams the nodes get (the config already checked); None when there are none and nothing is enforced."""
        if not self.teams and not self.enforce_accounts:
            return None
        return parse_teams(self.teams, self.enforce_accounts, [u.name for u in self.cluster_users()])

    def cluster_directory(self) -> Directory | None:
        """The directory the nodes get (the config already checked); None when there is none."""
        return parse_directory(self.directory)

    def problems(self, region: str | None = None, previous: ClusterConfig | None = None) -> list[Problem]:
        """Every rule's findings (errors, warnings, infos) that ``suppress`` leaves, with field path and rule id."""
        return self.judged(region, previous)[0]

    def judged(
        self, region: str | None = None, previous: ClusterConfig | None = None
    ) -> tuple[list[Problem], list[Suppressed]]:
        """:meth:`problems`, and the findings ``suppress`` silenced, each with its reason."""
        from hyperpod_cdk.rules import ClusterView, judge

        return judge(ClusterView.of_config(self, region=region, previous=previous))

    def warnings_if_valid(self, source: str = "cluster configuration", region: str | None = None) -> list[Problem]:
        """Raise :class:`ConfigurationError` listing every error; when there is none, return the warnings."""
        found = self.problems(region)
        raise_if_any(source, errors(found))
        return warnings(found)

    def check(self, source: str = "cluster configuration", region: str | None = None) -> list[Problem]:
        """The former name of :meth:`warnings_if_valid` (it raises on errors and returns the warnings), kept so
        callers keep working; use :meth:`warnings_if_valid`."""
        return self.warnings_if_valid(source, region)


def load_config(path: str | Path, region: str | None = None) -> ClusterConfig:
    """Read a YAML or JSON file; raises ConfigurationError listing every error with its field path."""
    config = parse_model(load_file(path), str(path))
    config.warnings_if_valid(str(path), region=region)
    return config


def load_file(path: str | Path) -> Any:
    """A config file's data (YAML or JSON); ConfigurationError when it cannot be read or passes a bound (size,
    nodes with aliases expanded, depth: :mod:`hyperpod_cdk.core.config_file`)."""
    return read_config_file(path)


def parse_config(data: Any, source: str = "cluster configuration", region: str | None = None) -> ClusterConfig:
    """The config from parsed data, checked by every rule; ConfigurationError lists every error."""
    config = parse_model(data, source)
    config.warnings_if_valid(source, region=region)
    return config


def parse_model(data: Any, source: str = "cluster configuration") -> ClusterConfig:
    """The config's shape only (types, allowed values, known keys): the JSON Schema's checks."""
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as error:
        found = error.errors()
        shown = [_describe(e) for e in found[:MAX_SHAPE_PROBLEMS]]
        if len(found) > MAX_SHAPE_PROBLEMS:
            more = f"{len(found) - MAX_SHAPE_PROBLEMS:,} more shape errors not shown"
            shown.append(Problem("", more, fix="fix the ones above and run again", rule=SHAPE_RULE))
        raise ConfigurationError(source, shown) from None


SHAPE_RULE = "CFG-SHAPE"
"""The id of the file's shape check: the JSON Schema's types, allowed values and known keys."""
MAX_SHAPE_PROBLEMS = 100
"""The most shape errors reported (the rest are counted): a file of 10,000 unknown keys gives a short report."""


def _describe(error: Any) -> Problem:
    path = ""
    for part in error["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    value = error.get("input")
    if isinstance(value, dict):
        return Problem(path, error["msg"], rule=SHAPE_RULE)
    return Problem(path, error["msg"], got=value, rule=SHAPE_RULE)


def json_schema() -> dict[str, Any]:
    from hyperpod_cdk.aws_data.update_policy import annotate
    from hyperpod_cdk.core.schema_fragments import add_to

    schema = annotate(add_to(ClusterConfig.model_json_schema()))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "hyperpod-cdk cluster configuration"
    return schema
