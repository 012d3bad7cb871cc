"""What a deployment of a config is, as one pure value: :func:`deployment`.

The organization's name prefix and the launch choices (the config's ``parameters`` section) are applied here,
once. The value carries what more than one consumer would otherwise re-derive: the cluster name HyperPod gets,
the stack's name, who configures Slurm and how nodes are provisioned, what the nodes get (the parameters and
users files) and the groups and counts at the template's defaults. ``TrainingCluster`` renders it into
constructs (the parameters file it uploads is :attr:`Deployment.parameters` with the resources' CloudFormation
attributes filled in), the apps name their stack and read the deployed counts with it, preflight looks the
cluster up by its name, the local cluster (``hyperpod_local.staging``) stages the same file with only the
emulation's overlays and records the provisioning mode, and the example snapshots
(``tests/snapshots/*.parameters.json``) pin it.

No ``aws_cdk`` import. A value that may be a CDK token (a config built in code) is recognized by the
``is_unresolved`` the caller passes, as the rules' views do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyperpod_cdk.aws_data.prices import Resolved, resolve
from hyperpod_cdk.core.merged_values import deployed_name
from hyperpod_cdk.core.parameters import parameters_file, with_resources, written_group
from hyperpod_cdk.core.template_parameters import group_capacity_id, group_type_id, template_parameters
from hyperpod_cdk.model import Capacity, NodeProvisioningMode, SlurmMode
from training_runtime.billing_weights import InstancePrice
from training_runtime.groups import COMPUTE, GroupSpec
from training_runtime.login_pool.params import LoginPoolParams
from training_runtime.params import MetricsTarget, ProvisioningParameters
from training_runtime.rest.params import RestApiParams
from training_runtime.users import User

if TYPE_CHECKING:
    from hyperpod_cdk.core.config import ClusterConfig

__all__ = ["STACK_NAME_PREFIX", "Deployment", "cluster_prices", "deployed_name", "deployment", "launched_group"]

STACK_NAME_PREFIX = "hyperpod-"
"""A deployment's stack is ``hyperpod-<cluster_name>`` (the config's name, before the organization's prefix),
unless the app is told another (``-c stack_name=NAME``)."""


@dataclass(frozen=True)
class Deployment:
    """What nodes of a deployed config get: its parameters file and users file, and its groups as launched."""

    config: ClusterConfig
    """The config as deployed: ``cluster_name`` as the organization's prefix rule leaves it."""
    parameters: ProvisioningParameters
    """The parameters file, but for the values only CloudFormation knows (:meth:`with_resources`): the FSx
    names and flag and the metrics target are null here."""
    users: tuple[User, ...]
    """The users file (names, fixed UIDs and GIDs, public keys)."""
    groups_as_launched: tuple[GroupSpec, ...]
    """The groups as a launch at the template's defaults runs them: the file's groups, with a type left to a
    launch choice (null in the file) at its default, the config's."""
    counts: Mapping[str, int]
    """Instances per group at the template's defaults (the config's counts)."""
    stack_name: str
    """The stack's name unless the app is told another: :data:`STACK_NAME_PREFIX` and the config's cluster name
    as written (an organization's prefix does not rename a deployed stack)."""

    @property
    def cluster_name(self) -> str:
        """The name HyperPod gets (:func:`deployed_name`): the stack's output, the scaler's and preflight's look-ups."""
        return self.parameters.cluster_name

    @property
    def mode(self) -> SlurmMode:
        """Who configures Slurm: HyperPod from the API, or the lifecycle scripts."""
        return SlurmMode(self.config.mode)

    @property
    def node_provisioning_mode(self) -> NodeProvisioningMode | None:
        """``CONTINUOUS``, or None: HyperPod's all-or-nothing model."""
        mode = self.config.node_provisioning_mode
        return NodeProvisioningMode(mode) if mode is not None else None

    @property
    def continuous(self) -> bool:
        """Whether nodes are provisioned continuously (partial capacity accepted; the scaler's API)."""
        return self.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS

    def with_resources(
        self,
        *,
        fsx_dns_name: str | None,
        fsx_mountname: str | None,
        fsx: bool | None,
        metrics: MetricsTarget | None,
        rest_api: RestApiParams | None = None,
        login_pool: LoginPoolParams | None = None,
    ) -> ProvisioningParameters:
        """The parameters file with the values the stack's resources give it
        (:func:`hyperpod_cdk.core.parameters.with_resources`)."""
        return with_resources(
            self.parameters,
            fsx_dns_name=fsx_dns_name,
            fsx_mountname=fsx_mountname,
            fsx=fsx,
            metrics=metrics,
            rest_api=rest_api,
            login_pool=login_pool,
        )

    def rest_api_parameters(self, key_secret_arn: str, region: str) -> RestApiParams | None:
        """``hyperpod_cdk.rest_api`` of the parameters file for the config's ``rest_api`` (None when off), with the
        signing key's secret a stack (or the local cluster) created: its ARN is known only then."""
        rest = self.config.rest_api
        if rest is None or not rest.enabled:
            return None
        return RestApiParams(key_secret_arn, region, port=rest.port, token_lifetime_s=rest.token_lifetime_s)

    def login_pool_parameters(self, host_keys_secret_arn: str, region: str) -> LoginPoolParams | None:
        """``hyperpod_cdk.login_pool`` of the parameters file for the config's ``login_pool`` (None when off), with
        the host keys' secret a stack (or the local cluster) created: its ARN is known only then."""
        pool = self.config.login_pool
        if pool is None:
            return None
        return LoginPoolParams(host_keys_secret_arn, region, health_port=pool.health_port)


def deployment(
    config: ClusterConfig, *, is_unresolved: Callable[[Any], bool] | None = None, region: str | None = None
) -> Deployment:
    """What a deployment of ``config`` puts on its nodes (the config already checked).

    * the cluster name with the organization's ``name_prefix`` (:func:`hyperpod_cdk.model.prefixed`; a name
      that ``is_unresolved`` is left alone: the prefix rule constrains the parameter instead);
    * each group as its launch choices (:func:`launched_group`) leave it in the parameters file;
    * the users file of ``config.users``;
    * with ``cost``, each instance type's price and its source (:func:`cluster_prices`; the snapshot of
      ``region``, then the config's overrides), which the nodes turn into billing weights.
    """
    unresolved = is_unresolved or (lambda _: False)
    stack_name = f"{STACK_NAME_PREFIX}{config.cluster_name}"
    name = deployed_name(config.cluster_name, config.organization, unresolved)
    if name != config.cluster_name:
        config = config.model_copy(update={"cluster_name": name})
    groups = tuple(launched_group(config, g.spec(), is_unresolved=unresolved) for g in config.instance_groups)
    parameters = parameters_file(
        cluster_name=config.cluster_name,
        mode=config.mode,
        node_provisioning_mode=config.node_provisioning_mode,
        groups=groups,
        fsx_mount_path=config.fsx_mount_path,
        openzfs_mount_path=config.storage_openzfs.mount_path if config.storage_openzfs else None,
        runtime_options=config.runtime,
        teams=config.cluster_teams(),
        shared_file_system=config.shares_file_system,
        directory=config.cluster_directory(),
    )
    if config.cost is not None:
        prices = cluster_prices(config, region, unresolved).prices
        parameters = dataclasses.replace(
            parameters, prices={t: InstancePrice(p.per_hour, p.source) for t, p in prices.items()}
        )
    own_types = {g.name: g.spec().instance_type for g in config.instance_groups}
    return Deployment(
        config=config,
        parameters=parameters,
        users=tuple(config.cluster_users()),
        groups_as_launched=tuple(
            g if g.instance_type is not None or g.flexible else dataclasses.replace(g, instance_type=own_types[g.name])
            for g in groups
        ),
        counts={g.name: g.count for g in config.instance_groups},
        stack_name=stack_name,
    )


def cluster_prices(
    config: ClusterConfig, region: str | None, is_unresolved: Callable[[Any], bool] | None = None
) -> Resolved:
    """The price of every instance type the config's compute groups may run (a flexible group's candidates too;
    the types that have partitions) in ``region``: the shipped snapshot, then ``cost.prices`` (synth never calls
    AWS)."""
    unresolved = is_unresolved or (lambda _: False)
    cost = config.cost
    types = set()
    for group in config.instance_groups:
        spec = group.spec()
        if spec.role != COMPUTE:
            continue
        for name in (spec.instance_type, *spec.instance_types):
            if isinstance(name, str) and not unresolved(name):
                types.add(name)
    overrides = {t: (o.per_hour, o.source) for t, o in (cost.prices if cost else {}).items()}
    where = region if region is not None and not unresolved(region) else None
    return resolve(types, where, overrides, cost.currency if cost else "USD")


def launched_group(
    config: ClusterConfig, spec: GroupSpec, *, is_unresolved: Callable[[Any], bool] | None = None
) -> GroupSpec:
    """A group as the parameters file names it when ``config`` leaves choices to the launching team
    (``stacks/choices.py`` makes them CloudFormation parameters):

    * a type chosen at launch (or a token) is left to the launch (:func:`hyperpod_cdk.core.parameters.written_group`);
    * a group that may launch on Spot is Spot: its interruption watcher just never sees a notice on On-Demand.
    """
    chosen = {p.logical_id: p for p in template_parameters(config)}
    spec = written_group(
        spec,
        type_left_to_launch=group_type_id(spec.name) in chosen
        or (is_unresolved is not None and is_unresolved(spec.instance_type)),
    )
    if may_be_spot(config, spec.name):
        spec = dataclasses.replace(spec, capacity=str(Capacity.SPOT))
    return spec


def may_be_spot(config: ClusterConfig, group: str) -> bool:
    """Whether the launching team may put ``group`` on Spot (its capacity choice allows ``spot``)."""
    chosen = next((p for p in template_parameters(config) if p.logical_id == group_capacity_id(group)), None)
    return chosen is not None and str(Capacity.SPOT) in (chosen.allowed_values or ())
