"""The one builder of the parameters file: what a cluster's nodes read at boot.

:func:`parameters_file` writes what a config (or a construct's props) decides; :func:`with_resources` fills in
the values only the stack's resources know (the FSx names and flag, the metrics target). ``HyperPodCluster``
uploads ``with_resources`` of either :func:`hyperpod_cdk.core.deployment.deployment`'s file (``TrainingCluster``, the
app) or of :func:`parameters_file` of its props (embedded in your own stack); the local cluster starts from the
same deployment and then overlays only what the emulation must change. A field added to the contract is
therefore added here once, for all.

No ``aws_cdk`` import: the values may be CDK tokens (the file system's DNS and mount names), but building
the parameters needs no construct.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from hyperpod_cdk.core.accounting import slurmdbd_owner
from training_runtime.directory import Directory
from training_runtime.groups import GroupSpec
from training_runtime.login_pool.params import LoginPoolParams
from training_runtime.options import OptionsError, parse_options
from training_runtime.params import SLURMDBD_BY_RUNTIME, MetricsTarget, ProvisioningParameters
from training_runtime.rest.params import RestApiParams
from training_runtime.team_model import Teams


def written_group(spec: GroupSpec, *, type_left_to_launch: bool) -> GroupSpec:
    """``spec`` as the parameters file writes it. A type left to the launch (a template parameter, or any other
    CloudFormation value) is null: the file is fixed when the template is built, so each node reads its group's
    type from HyperPod's resource config."""
    return dataclasses.replace(spec, instance_type=None) if type_left_to_launch else spec


def parameters_file(
    *,
    cluster_name: str,
    mode: str,
    node_provisioning_mode: str | None,
    groups: Sequence[GroupSpec],
    fsx_mount_path: str,
    openzfs_mount_path: str | None,
    runtime_options: Mapping[str, object] | None,
    teams: Teams | None = None,
    shared_file_system: bool = False,
    rest_api: RestApiParams | None = None,
    directory: Directory | None = None,
) -> ProvisioningParameters:
    """The parameters file of a cluster whose nodes see ``groups`` (each as :func:`written_group` leaves it), but
    for the values only the stack's resources know (:func:`with_resources`; null here).

    Every argument but ``teams`` is required, so a caller cannot leave one out by accident; ``teams`` (the
    config's Slurm accounts, ``ClusterConfig.cluster_teams``) defaults to none, as a construct embedded in your own
    stack has no teams.
    ``runtime_options`` are copied as given (the node parses them with
    ``training_runtime.options.parse_options``); the caller's mapping is never shared with the result.
    ``openzfs_mount_path`` is where HyperPod mounts FSx for OpenZFS (None: none); the users' homes live there.
    ``shared_file_system``: another cluster uses these file systems (``ClusterConfig.shares_file_system``), so the
    nodes keep their state and homes in directories of this cluster's own.
    ``directory`` (``ClusterConfig.cluster_directory``): the LDAP directory the nodes resolve users from (None: none).
    ``node_provisioning_mode`` with ``mode`` and the options' accounting decides who runs slurmdbd
    (:func:`hyperpod_cdk.core.accounting.slurmdbd_owner`, written as ``slurmdbd_owner``).
    ``rest_api``: Slurm's REST API on the controller (its key's secret and port); None: off. Its secret is a stack
    resource, so a config's deployment leaves it to :func:`with_resources`.
    """
    return ProvisioningParameters(
        cluster_name=cluster_name,
        mode=str(mode),
        groups=tuple(groups),
        fsx_mount_path=fsx_mount_path,
        openzfs_mount_path=openzfs_mount_path,
        shared_file_system=shared_file_system,
        slurmdbd_owner=_slurmdbd_owner(mode, node_provisioning_mode, runtime_options),
        options=dict(runtime_options or {}),
        teams=teams,
        rest_api=rest_api,
        directory=directory,
    )


def with_resources(
    parameters: ProvisioningParameters,
    *,
    fsx_dns_name: str | None,
    fsx_mountname: str | None,
    fsx: bool | None,
    metrics: MetricsTarget | None,
    rest_api: RestApiParams | None = None,
    login_pool: LoginPoolParams | None = None,
) -> ProvisioningParameters:
    """``parameters`` with the values the stack's resources give it (CloudFormation values at synth).

    ``fsx`` is the explicit FSx flag (None: FSx exactly when ``fsx_dns_name`` is given).
    ``metrics`` is where the nodes remote-write their metrics (``hyperpod_cdk.metrics``; None: nowhere).
    ``rest_api`` names the REST API's key secret (``SlurmRestApi.node_parameters``); None keeps what ``parameters``
    says.
    ``login_pool`` names the login pool's host keys' secret and health port (``LoginPool.node_parameters``); None
    keeps what ``parameters`` says.
    """
    return dataclasses.replace(
        parameters,
        fsx_dns_name=fsx_dns_name,
        fsx_mountname=fsx_mountname,
        fsx=fsx,
        metrics=metrics,
        rest_api=rest_api if rest_api is not None else parameters.rest_api,
        login_pool=login_pool if login_pool is not None else parameters.login_pool,
    )


def _slurmdbd_owner(mode: str, node_provisioning_mode: str | None, runtime_options: Mapping[str, object] | None) -> str:
    try:
        options = parse_options(dict(runtime_options or {}), check_values=False)
    except OptionsError:
        # Options of the wrong shape have no external database to hand over; every caller reports them (the
        # construct's and the config's rules, the local layout's check) before a node could read this file.
        return SLURMDBD_BY_RUNTIME
    return slurmdbd_owner(
        str(mode), str(node_provisioning_mode) if node_provisioning_mode else None, options.accounting
    )
