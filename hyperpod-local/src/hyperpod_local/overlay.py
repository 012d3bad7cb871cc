"""The emulation's overlays: what the local cluster changes in the parameters file a deployment puts on its nodes
(:func:`hyperpod_cdk.core.deployment.deployment`), and nothing else (pure, but :func:`host_hardware` reads this
machine's CPU count)."""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from hyperpod_cdk.core.config import ClusterConfig
from hyperpod_cdk.core.deployment import deployment
from hyperpod_local.control_plane.secrets import login_host_keys_name, rest_key_name, secret_arn
from hyperpod_local.layout import LOCAL_REGION, LayoutError
from training_runtime.emulation import Emulation
from training_runtime.hardware import hardware_for
from training_runtime.login_pool.params import LoginPoolParams
from training_runtime.option_types import MIN_CRED_EXPIRE
from training_runtime.options import options_problems
from training_runtime.params import ProvisioningParameters
from training_runtime.rest.params import RestApiParams

EMULATION_SLURM_OPTIONS: dict[str, int] = {
    "slurmd_timeout": 10,
    "message_timeout": 5,
    "sched_interval": 2,
    "cred_expire": MIN_CRED_EXPIRE,
    "slurmctld_timeout": 10,
}
"""Fast failure detection for fault tests (docs/research/local-slurm.md §6.6): a crashed node is DOWN
within ~15 s, a requeued job may restart after cred_expire + 1 s; cred_expire below 70 lets a stale signal
kill the restarted job (§6.3 there). With a backup controller, it takes over ~10 s after the primary stops."""
EMULATED_MEMORY_MIB = 2000
"""RealMemory every node registers with; below the machine's memory so slurmd never reports less."""


def host_hardware(cpus: int | None = None) -> dict[str, int]:
    """This machine as one emulated node: what ``slurmd -C`` reports here, with a fixed, small memory."""
    count = cpus if cpus is not None else (os.cpu_count() or 1)
    return {
        "cpus": count,
        "sockets": 1,
        "cores_per_socket": count,
        "threads_per_core": 1,
        "memory_mib": EMULATED_MEMORY_MIB,
    }


def local_options(
    runtime: Mapping[str, Any],
    instance_types: Sequence[str],
    *,
    cpus: int | None = None,
    own_size: Sequence[str] = (),
) -> dict[str, Any]:
    """The config's runtime options with the emulation's values on top: fast Slurm failure detection,
    every instance type sized as this machine, no accelerator software, no container software installed.

    The types in ``own_size`` (a flexible group's) keep their own CPU count where this machine has that many
    (else the machine's), so the nodes of one group differ as the types do on AWS."""
    options = copy.deepcopy(dict(runtime))
    slurm = options.get("slurm")
    options["slurm"] = {**(dict(slurm) if isinstance(slurm, Mapping) else {}), **EMULATION_SLURM_OPTIONS}
    hardware = options.get("node_hardware")
    merged_hardware = dict(hardware) if isinstance(hardware, Mapping) else {}
    figures = host_hardware(cpus)
    for instance_type in instance_types:
        merged_hardware[instance_type] = dict(figures)
    for instance_type in own_size:
        try:
            own = hardware_for(instance_type, hardware if isinstance(hardware, Mapping) else {})
        except ValueError:  # invalid node_hardware: the options check below reports it
            own = None
        merged_hardware[instance_type] = host_hardware(min(figures["cpus"], own.cpus) if own else figures["cpus"])
    options["node_hardware"] = merged_hardware
    options["install_accelerator_software"] = False
    accounting = options.get("accounting")
    if isinstance(accounting, Mapping) and accounting.get("database") == "external":
        # No RDS or Secrets Manager here: the controller's own MariaDB plays the external database.
        kept = {k: v for k, v in accounting.items() if k in ("enabled", "user")}
        options["accounting"] = {**kept, "database": "local"}
    containers = options.get("containers")
    if isinstance(containers, Mapping) and containers.get("install_missing"):
        # No GitHub here: enroot's packages and pyxis's source cannot be downloaded (docs/local-cluster.md).
        options["containers"] = {**containers, "install_missing": False}
    return options


def local_parameters(config: ClusterConfig, *, cpus: int | None = None) -> ProvisioningParameters:
    """The parameters file of the local cluster of ``config``: what a deployment puts on the nodes
    (:func:`hyperpod_cdk.core.deployment.deployment`) with :func:`emulated`'s overlays, launched at the defaults."""
    deployed = deployment(config)
    chosen = [g.instance_type for g in deployed.groups_as_launched if g.instance_type]
    return emulated(deployed.parameters, cpus=cpus, instance_types=chosen)


def emulated(
    deployed: ProvisioningParameters,
    *,
    cpus: int | None = None,
    instance_types: Sequence[str] = (),
    imds_url: str | None = None,
    sagemaker_url: str | None = None,
    secretsmanager_url: str | None = None,
    scaler_timing: tuple[float, float] | None = None,
) -> ProvisioningParameters:
    """``deployed`` as the local cluster runs it. The overlays, and nothing else:

    * ``fsx_dns_name``, ``fsx_mountname`` and the ``fsx`` flag become null: no Lustre, the shared directory
      is bind-mounted at ``fsx_mount_path`` instead;
    * ``openzfs_mount_path`` becomes null: no OpenZFS either, so the homes live on the shared directory;
    * ``options.slurm``: the keys of :data:`EMULATION_SLURM_OPTIONS` (fast failure detection);
    * ``options.node_hardware``: every instance type of the groups (and ``instance_types``: the types a template
      leaves to a parameter, as chosen locally) sized as this machine
      (:func:`host_hardware`), a flexible group's types at their own CPU count up to the machine's;
    * ``options.install_accelerator_software``: false;
    * ``options.accounting``: an ``external`` database becomes ``local`` (MariaDB on the controller; its
      host, port and password secret dropped): there is no RDS or Secrets Manager here;
    * ``emulation`` (``hyperpod_cdk.emulation``, a key only the local cluster writes): ``hardware`` true, the
      types' GPUs, Neuron devices and EFA interfaces are declared, not present (the health checks skip them and
      say so, the launcher runs CPU processes); ``imds_url``, where given: the Spot watcher reads the cluster's
      fake metadata service (:mod:`hyperpod_local.imds`); ``sagemaker_url``, where given: the SageMaker API calls
      of the node (the scaler's) go to the emulated control plane (:mod:`hyperpod_local.control_plane`);
      ``secretsmanager_url``, where given and the config has ``rest_api``, ``directory`` or ``login_pool``: the
      node's Secrets Manager calls (the REST key, the directory's bind password, the login pool's host keys) go to
      the control plane's emulated Secrets Manager;
      ``scaler_timing`` (interval, minute), where given: the scaler's cycle and the length of its idle minute in
      seconds (``scaler_interval_s``, ``scaler_minute_s``: the drills' short scale-in);
    * ``rest_api`` (Slurm's REST API), where on: its key is the emulated Secrets Manager's secret of the cluster
      (:func:`hyperpod_local.control_plane.secrets.rest_key_name`, in the local Region), read at
      ``secretsmanager_url`` (the emulation's ``secretsmanager_url``; the control plane serves it);
    * ``login_pool``, where on: its host keys are the emulated Secrets Manager's secret of the cluster
      (:func:`hyperpod_local.control_plane.secrets.login_host_keys_name`, in the local Region), which the control
      plane creates with a generated placeholder at its start, as the stack does;
    * ``metrics`` becomes null: no remote write, the local Prometheus scrapes the nodes itself, so the emulation's
      ``exporters_on_network`` is true (on HyperPod the exporters listen on 127.0.0.1 only).
    """
    fixed = sorted(
        {g.resolved_type for g in deployed.groups if not g.flexible and g.instance_type} | set(instance_types)
    )
    flexible = sorted({t for g in deployed.groups for t in g.instance_types})
    options = local_options(deployed.options, fixed, cpus=cpus, own_size=flexible)
    problems = options_problems(options, "runtime")
    if problems:
        raise LayoutError("local cluster runtime options", problems)
    local = dataclasses.replace(
        deployed,
        fsx_dns_name=None,
        fsx_mountname=None,
        fsx=None,
        metrics=None,
        options=options,
        emulation=Emulation(
            hardware=True,
            imds_url=imds_url,
            sagemaker_url=sagemaker_url,
            secretsmanager_url=(
                secretsmanager_url
                if deployed.rest_api is not None or deployed.directory is not None or deployed.login_pool is not None
                else None
            ),
        ),
        rest_api=local_rest_api(deployed),
        login_pool=local_login_pool(deployed),
    )
    if local.emulation is not None:  # the local Prometheus scrapes every node over the bridge
        local = dataclasses.replace(local, emulation=dataclasses.replace(local.emulation, exporters_on_network=True))
    if scaler_timing is not None and local.emulation is not None:
        interval, minute = scaler_timing
        timed = dataclasses.replace(local.emulation, scaler_interval_s=interval, scaler_minute_s=minute)
        local = dataclasses.replace(local, emulation=timed)
    return dataclasses.replace(local, openzfs_mount_path=None)


def local_rest_api(deployed: ProvisioningParameters) -> RestApiParams | None:
    """``deployed.rest_api`` with the local cluster's secret: its name from the cluster's, in the local Region
    (the deployed ARN is a CloudFormation value, only known at deploy)."""
    if deployed.rest_api is None:
        return None
    arn = secret_arn(rest_key_name(deployed.cluster_name))
    return dataclasses.replace(deployed.rest_api, key_secret_arn=arn, region=LOCAL_REGION)


def local_login_pool(deployed: ProvisioningParameters) -> LoginPoolParams | None:
    """``deployed.login_pool`` with the local cluster's host-key secret (its name from the cluster's, the local
    Region); the health port as deployed."""
    if deployed.login_pool is None:
        return None
    arn = secret_arn(login_host_keys_name(deployed.cluster_name))
    return dataclasses.replace(deployed.login_pool, host_keys_secret_arn=arn, region=LOCAL_REGION)
