"""ClusterView: what the rules see — the whole config, or the part a construct was given."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from hyperpod_cdk.core.suppress import Suppression, merged
from hyperpod_cdk.model import DEFAULT_FSX_MOUNT_PATH, InstanceGroup, SlurmMode
from training_runtime.hardware import NodeHardware, hardware_for
from training_runtime.options import RuntimeOptions, parse_options

if TYPE_CHECKING:
    from hyperpod_cdk.core.config import (
        ClusterConfig,
        CostConfig,
        LifecycleConfig,
        NetworkConfig,
        ObservabilityConfig,
        OpenZfsConfig,
        OrganizationConfig,
        ParametersConfig,
        StorageConfig,
    )
    from hyperpod_cdk.core.login_pool_config import LoginPoolConfig
    from hyperpod_cdk.core.rest_api_config import RestApiConfig
    from hyperpod_cdk.preflight.account import Account


SECTIONS = (
    "cluster",
    "instance_groups",
    "network",
    "storage",
    "storage_openzfs",
    "lifecycle",
    "runtime",
    "users",
    "teams",
    "directory",
    "parameters",
    "organization",
    "observability",
    "suppress",
    "cost",
    "rest_api",
    "login_pool",
)
"""The config file's sections, in the order the reference lists them: ``cluster`` (the top-level scalars),
then ClusterConfig's nested fields in their order (tests/test_rules_reference.py checks it against the model)."""
FACTS = ("hardware", "region")
"""What a rule may need besides sections: the instance catalogue (always there) and the Region (optional)."""


def never_unresolved(value: Any) -> bool:
    """A config file's values are always concrete (YAML cannot hold a CDK token)."""
    return False


@dataclass(frozen=True)
class ClusterView:
    """The input of every rule. ``sections`` says which parts are present; a rule runs only when its
    section and the sections it needs are. Field paths are the config file's, unless ``paths`` renames
    a section's root (a construct reports ``runtime_options`` where the file says ``runtime``)."""

    sections: frozenset[str]
    cluster_name: str = "ml-cluster"
    mode: str = SlurmMode.API_DRIVEN
    slurm_config_strategy: str = "Merge"
    node_recovery: str = "Automatic"
    fsx_mount_path: str = DEFAULT_FSX_MOUNT_PATH
    node_provisioning_mode: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    groups: Sequence[InstanceGroup] = ()
    network: NetworkConfig | None = None
    storage: StorageConfig | None = None
    openzfs: OpenZfsConfig | None = None
    """FSx for OpenZFS (``storage_openzfs`` section)."""
    lifecycle: LifecycleConfig | None = None
    runtime: Mapping[str, Any] = field(default_factory=dict)
    users: Sequence[Any] = ()
    teams: Sequence[Any] = ()
    """Slurm accounts (``teams`` section), checked by the runtime's own rules (training_runtime.teams)."""
    enforce_accounts: Any = False
    directory: Any = None
    """The LDAP directory (``directory`` section), checked by the runtime's own rules (training_runtime.directory)."""
    parameters: ParametersConfig | None = None
    """The launch choices (``parameters`` section): CloudFormation parameters of a published template."""
    organization: OrganizationConfig | None = None
    observability: ObservabilityConfig | None = None
    """Metrics, Grafana and alarms (``observability`` section)."""
    cost: CostConfig | None = None
    """Prices as Slurm billing and the AWS budget (``cost`` section)."""
    rest_api: RestApiConfig | None = None
    """Slurm's REST API, its load balancer and the minting function (``rest_api`` section)."""
    login_pool: LoginPoolConfig | None = None
    """The login nodes behind one load balancer with shared host keys (``login_pool`` section)."""
    region: str | None = None
    """The AWS Region when known (``validate --region``, or a stack's concrete Region)."""
    is_unresolved: Callable[[Any], bool] = never_unresolved
    paths: Mapping[str, str] = field(default_factory=dict)
    given: frozenset[str] = frozenset()
    """The top-level fields the file sets (a field left out takes its default)."""
    accepted: tuple[str, ...] = ()
    """Rules of unconfirmed Slurm support whose warnings the config accepts (``accept_unconfirmed``, the former
    form of ``suppress``)."""
    suppress: tuple[Suppression, ...] = ()
    """The rules the config silences, each with a reason (``suppress``; :mod:`hyperpod_cdk.core.suppress`)."""
    previous: ClusterView | None = None
    """The deployed config (``validate --previous``): rules warn about changes that replace resources."""
    config: ClusterConfig | None = field(default=None, compare=False, repr=False)
    """The config file itself, when the view is of one (the update policies compare two whole configs)."""
    account: Account | None = None
    """The AWS account's look-ups (``hyperpod-cdk preflight``), with ``aws`` in ``sections``; None offline."""

    @classmethod
    def of_config(
        cls, config: ClusterConfig, region: str | None = None, previous: ClusterConfig | None = None
    ) -> ClusterView:
        return cls(
            sections=frozenset(SECTIONS),
            cluster_name=config.cluster_name,
            mode=config.mode,
            slurm_config_strategy=config.slurm_config_strategy,
            node_recovery=config.node_recovery,
            fsx_mount_path=config.fsx_mount_path,
            node_provisioning_mode=config.node_provisioning_mode,
            tags=config.tags,
            groups=tuple(config.instance_groups),
            network=config.network,
            storage=config.storage,
            openzfs=config.storage_openzfs,
            lifecycle=config.lifecycle,
            runtime=config.runtime,
            users=config.users,
            teams=config.teams,
            enforce_accounts=config.enforce_accounts,
            directory=config.directory,
            parameters=config.parameters,
            organization=config.organization,
            observability=config.observability,
            cost=config.cost,
            rest_api=config.rest_api,
            login_pool=config.login_pool,
            region=region,
            given=frozenset(config.model_fields_set),
            accepted=tuple(config.accept_unconfirmed),
            suppress=tuple(Suppression.of(s) for s in config.suppress),
            previous=cls.of_config(previous, region) if previous is not None else None,
            config=config,
        )

    @property
    def suppressions(self) -> tuple[Suppression, ...]:
        """``suppress`` and, after it, ``accept_unconfirmed``'s rules as suppressions."""
        return merged(self.suppress, self.accepted)

    def path(self, section: str, rest: str = "") -> str:
        """The field path of ``rest`` in ``section`` as this view's reader knows it."""
        root = self.paths.get(section, "" if section == "cluster" else section)
        if not rest:
            return root
        if not root:
            return rest
        return root + ("" if rest.startswith("[") else ".") + rest

    def concrete(self, value: Any) -> bool:
        """Whether ``value`` is known now (not a CDK token), so a rule can judge it."""
        return value is not None and not self.is_unresolved(value)

    @cached_property
    def runtime_options(self) -> RuntimeOptions | None:
        """The parsed ``runtime`` section; None when its shape is wrong (the shape rule reports why)."""
        try:
            return parse_options(dict(self.runtime), "runtime", check_values=False)
        except ValueError:
            return None

    def hardware(self, instance_type: str, threads_per_core: int = 1) -> NodeHardware | None:
        """The catalogue's figures for a type, with the config's ``runtime.node_hardware`` applied."""
        options = self.runtime_options
        overrides = options.node_hardware if options is not None else {}
        try:
            return hardware_for(instance_type, overrides, threads_per_core if threads_per_core in (1, 2) else 1)
        except ValueError:
            return None

    def types_of(self, group: InstanceGroup) -> tuple[str, ...]:
        """Every instance type the group's nodes may have (a flexible group's list), or () when a type is not
        known now (a CDK token) or none is given: rules judge only concrete types. Each type once."""
        types = tuple(dict.fromkeys(group.types))
        return types if all(self.concrete(t) for t in types) else ()

    @property
    def compute_groups(self) -> list[InstanceGroup]:
        return [g for g in self.groups if g.role == "compute"]


def storage_path(view: ClusterView, field: str) -> str:
    """The field path of ``field`` in the ``storage`` section (used by the storage and data repository rules)."""
    return view.path("storage", field)


def has_new_storage(view: ClusterView) -> bool:
    """Whether the view has a new (not adopted) Lustre file system to judge."""
    return view.storage is not None and view.storage.existing is None
