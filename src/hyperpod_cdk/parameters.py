"""The one builder of the parameters file: what a cluster's nodes read at boot.

``HyperPodCluster`` uploads what :func:`cluster_parameters` returns (``TrainingCluster`` passes it
:func:`hyperpod_cdk.deployment.deployment`'s file, built by :func:`parameters_file`), and the local cluster
starts from the same deployment and then overlays only what the emulation must change. A field added to the
contract is therefore added here once, for both.

No ``aws_cdk`` import: the values may be CDK tokens (the file system's DNS and mount names), but building
the parameters needs no construct.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from hyperpod_cdk.accounting import slurmdbd_owner
from training_runtime.groups import GroupSpec
from training_runtime.options import OptionsError, parse_options
from training_runtime.params import SLURMDBD_BY_RUNTIME, MetricsTarget, ProvisioningParameters


class HasGroupSpec(Protocol):
    """An instance group as the constructs and the config model hold it (``InstanceGroup``)."""

    def spec(self) -> GroupSpec: ...


def cluster_parameters(
    *,
    cluster_name: str,
    mode: str,
    node_provisioning_mode: str | None,
    instance_groups: Iterable[HasGroupSpec],
    fsx_dns_name: str | None,
    fsx_mountname: str | None,
    fsx: bool | None,
    fsx_mount_path: str,
    openzfs_mount_path: str | None,
    runtime_options: Mapping[str, object] | None,
    metrics: MetricsTarget | None,
    is_unresolved: Callable[[Any], bool] | None = None,
) -> ProvisioningParameters:
    """The parameters file of a cluster with these props (:func:`parameters_file` of the groups' specs).

    An instance type that ``is_unresolved`` (a template parameter) is written as null: the file is fixed
    when the template is built, so each node reads its group's type from HyperPod's resource config.
    """

    def spec(group: HasGroupSpec) -> GroupSpec:
        found = group.spec()
        if is_unresolved is not None and is_unresolved(found.instance_type):
            return dataclasses.replace(found, instance_type=None)
        return found

    return parameters_file(
        cluster_name=cluster_name,
        mode=mode,
        node_provisioning_mode=node_provisioning_mode,
        groups=tuple(spec(g) for g in instance_groups),
        fsx_dns_name=fsx_dns_name,
        fsx_mountname=fsx_mountname,
        fsx=fsx,
        fsx_mount_path=fsx_mount_path,
        openzfs_mount_path=openzfs_mount_path,
        runtime_options=runtime_options,
        metrics=metrics,
    )


def parameters_file(
    *,
    cluster_name: str,
    mode: str,
    node_provisioning_mode: str | None,
    groups: Sequence[GroupSpec],
    fsx_dns_name: str | None,
    fsx_mountname: str | None,
    fsx: bool | None,
    fsx_mount_path: str,
    openzfs_mount_path: str | None,
    runtime_options: Mapping[str, object] | None,
    metrics: MetricsTarget | None,
) -> ProvisioningParameters:
    """The parameters file of a cluster whose nodes see ``groups``.

    Every argument is required, so a caller cannot leave one out by accident.
    ``runtime_options`` are copied as given (the node parses them with
    ``training_runtime.options.parse_options``); the caller's mapping is never shared with the result.
    ``fsx`` is the explicit FSx flag (None: FSx exactly when ``fsx_dns_name`` is given).
    ``openzfs_mount_path`` is where HyperPod mounts FSx for OpenZFS (None: none); the users' homes live there.
    ``metrics`` is where the nodes remote-write their metrics (``hyperpod_cdk.metrics``; None: nowhere).
    ``node_provisioning_mode`` with ``mode`` and the options' accounting decides who runs slurmdbd
    (:func:`hyperpod_cdk.accounting.slurmdbd_owner`, written as ``slurmdbd_owner``).
    """
    return ProvisioningParameters(
        cluster_name=cluster_name,
        mode=str(mode),
        groups=tuple(groups),
        fsx_dns_name=fsx_dns_name,
        fsx_mountname=fsx_mountname,
        fsx=fsx,
        fsx_mount_path=fsx_mount_path,
        openzfs_mount_path=openzfs_mount_path,
        metrics=metrics,
        slurmdbd_owner=_slurmdbd_owner(mode, node_provisioning_mode, runtime_options),
        options=dict(runtime_options or {}),
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
