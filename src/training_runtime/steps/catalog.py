"""Which steps a node runs, in order, for its role and platform."""

from __future__ import annotations

from typing import List

from training_runtime.node import GENERIC, Node
from training_runtime.params import LIFECYCLE_DRIVEN
from training_runtime.steps import Step, rest_api, rest_service
from training_runtime.steps.accelerators import accelerator_steps
from training_runtime.steps.accounting import AccountingCluster, LocalDatabase, SlurmdbdConfig
from training_runtime.steps.ami import AmiSetup, accounting_by_ami
from training_runtime.steps.billing import HyperPodBillingWeights
from training_runtime.steps.configless import SLURMD_DROP_IN, ConfiglessPush, SlurmdConfServer
from training_runtime.steps.containers import container_push_steps, container_steps
from training_runtime.steps.daemon import RunningDaemon
from training_runtime.steps.directory import (
    CA_PATH,
    PACKAGES,
    SSSD,
    SSSD_CONF,
    DirectoryClash,
    DirectoryPam,
    SshdDirectoryKeys,
    SssdConfig,
)
from training_runtime.steps.directory_compute import PamSlurmAdopt
from training_runtime.steps.directory_teams import directory_sync_steps
from training_runtime.steps.guard import guard_steps
from training_runtime.steps.health import health_steps
from training_runtime.steps.imds import imds_steps
from training_runtime.steps.installed import InstalledRuntime
from training_runtime.steps.login_node import LoginNodeJobs
from training_runtime.steps.login_pool import login_pool_steps
from training_runtime.steps.munge import MUNGED, NODE_KEY, MungeKey
from training_runtime.steps.observability import observability_steps
from training_runtime.steps.pytorch_env import pytorch_steps
from training_runtime.steps.scaler import scaler_steps
from training_runtime.steps.slurm import (
    ACCOUNTING_INCLUDE,
    HyperPodAccounting,
    HyperPodSlurmConfig,
    SlurmConfig,
    SlurmdOptions,
    conf_path,
    slurm_config_files,
    slurmctld,
    slurmd,
    slurmdbd,
)
from training_runtime.steps.slurm_version import SlurmVersion
from training_runtime.steps.spot import spot_steps
from training_runtime.steps.storage import LustreMount, SharedStorage
from training_runtime.steps.system import ClusterHosts, Packages
from training_runtime.steps.teams import SlurmTeams
from training_runtime.steps.topology import HyperPodTopology
from training_runtime.steps.users import SshBetweenNodes, Users
from training_runtime.users import load_users


def packages_for(node: Node) -> List[str]:
    packages = ["munge", "slurm-client"]
    if node.is_controller:
        packages.append("slurmctld")
        if node.options.accounting.enabled:
            packages.append("slurmdbd")
            if node.options.accounting.database == "local":
                packages += ["mariadb-server", "mariadb-client"]
    if node.is_compute:
        packages.append("slurmd")
    if node.is_controller and node.params.rest_api is not None:
        packages += ["slurmrestd", "slurm-wlm-jwt-plugin", "openssl"]  # Debian's names (steps/rest_api.py)
    if node.options.security.imds_root_only:
        packages.append("iptables")  # the metadata service for root only (steps/imds.py)
    return packages


def steps_for(node: Node) -> List[Step]:
    generic = node.platform == GENERIC
    users = load_users(node.assets_dir)
    steps: List[Step] = [InstalledRuntime()]
    steps += health_steps(node)
    if generic:
        steps += [ClusterHosts(), Packages(packages_for(node) + (["openssh-client"] if users else []), "slurm")]
    if node.params.fsx_dns_name and node.params.mode == LIFECYCLE_DRIVEN:
        steps.append(LustreMount())
    if node.has_shared_storage:
        steps.append(SharedStorage())
    if generic:
        steps += [MungeKey(), RunningDaemon(MUNGED, [NODE_KEY])]
    if users:
        steps += [Users(users), SshBetweenNodes(users)]
    directory = node.params.directory
    if directory is not None:  # before the metadata guard, which may allow a directory group
        steps += [
            Packages(PACKAGES, "directory"),
            SssdConfig(directory),
            RunningDaemon(SSSD, [SSSD_CONF, CA_PATH]),
            DirectoryPam(directory),
            SshdDirectoryKeys(directory),
            DirectoryClash(users),
        ]
    steps += imds_steps(node)  # after the groups it may allow exist, before any daemon the runtime starts
    steps += accelerator_steps(node)
    steps.append(SlurmConfig() if generic else HyperPodSlurmConfig())
    if not generic and node.options.slurm.version is not None:
        # Before any Slurm daemon starts, after HyperPod's slurm.conf is there to be copied along (PR #1107).
        steps.append(SlurmVersion(node.options.slurm.version))
    if node.is_controller and not generic:
        steps.append(HyperPodTopology())  # HyperPod's automatic topology: left alone, reported in the plan
    # enroot, Docker and pyxis: after slurm.conf (and a Slurm switch, which copies etc/), before any daemon starts.
    steps += container_steps(node)
    if node.is_controller:
        steps += rest_api.key_steps(node)  # the REST API's JWT key before any daemon that names it starts
        accounting = node.options.accounting
        # Given the external database (AccountingDatabase), HyperPod configures slurmdbd and the controller's
        # accounting itself: the runtime writes no second configuration (the generic platform has no HyperPod).
        # The same when the AMI configured accounting before this script ran (steps/ami.py).
        by_hyperpod = not generic and (node.params.slurmdbd_by_hyperpod or accounting_by_ami(node) is not None)
        ours = accounting.enabled and not by_hyperpod
        if ours:
            if accounting.database == "local":
                steps.append(LocalDatabase())
            steps += [SlurmdbdConfig(), RunningDaemon(slurmdbd(node), [conf_path(node, "slurmdbd.conf")])]
            if not generic:
                # sacctmgr reads AccountingStorageType from HyperPod's slurm.conf, which takes it from the
                # included accounting.conf: write that first, or sacctmgr refuses to add the cluster.
                steps.append(HyperPodAccounting())
            steps.append(AccountingCluster())
            if node.params.teams is not None and node.params.teams.teams:
                steps.append(SlurmTeams(node.params.teams))
                steps += directory_sync_steps(node)  # the teams' accounts exist: their groups' members join
        controller_files = slurm_config_files(node) if generic else [conf_path(node, ACCOUNTING_INCLUDE)]
        # HyperPod: accounting.conf is watched when the runtime writes keys there (its accounting, the REST API's).
        watched = generic or ours or node.params.rest_api is not None
        steps.append(RunningDaemon(slurmctld(node), controller_files if watched else []))
        if ours and not generic:
            # HyperPod's compute and login nodes hold the configuration slurmctld sent them: send the new one.
            steps.append(ConfiglessPush(controller_files))
        steps += container_push_steps(node)  # HyperPod: a changed plugstack.conf or cgroup.conf to configless nodes
        if not generic and node.params.prices:  # prices as Slurm billing (generic: in the rendered slurm.conf)
            # After the pushes: their `scontrol reconfigure` re-reads slurm.conf, which drops weights set by scontrol
            # update (seen on Slurm 24.11, tests/test_local_cost.py).
            steps.append(HyperPodBillingWeights())
        steps += scaler_steps(node)  # after slurmctld: the service drives Slurm
        steps += rest_service.service_steps(node, slurmdbd_ours=ours)  # after slurmctld: slurmrestd talks to it
    if node.is_compute or (node.is_login and not generic):
        if generic and node.has_systemd:
            steps.append(SlurmdOptions())
        slurmd_files = slurm_config_files(node) if generic else []
        if not generic and node.has_systemd and node.params.mode == LIFECYCLE_DRIVEN:
            # The runtime starts the AMI's slurmd unit itself here (api-driven: HyperPod already has).
            steps.append(SlurmdConfServer())
            slurmd_files = [SLURMD_DROP_IN]
        steps.append(RunningDaemon(slurmd(node), slurmd_files))
        if node.is_compute and not node.is_login and node.params.directory is not None:
            steps.append(PamSlurmAdopt())  # compute nodes only: never login nodes or the controller
        if node.is_login:  # HyperPod's dev partition holds login nodes too: keep batch jobs off them
            steps.append(LoginNodeJobs())
        steps += spot_steps(node)
    steps += login_pool_steps(node)  # login nodes of a login pool: the pool's host keys, sshd, the health endpoint
    if not node.is_controller:
        steps += pytorch_steps(node)
    steps += observability_steps(node)
    steps += guard_steps(node)  # HyperPod: after Slurm runs and the metrics directory is there
    if not generic:  # what HyperPod's AMI set up before this script: found, reported (left alone), never overwritten
        steps.append(AmiSetup(tuple(u.name for u in users)))
    return steps
