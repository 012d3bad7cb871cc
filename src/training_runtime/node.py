"""Everything a step knows about the node it runs on, passed explicitly (no global state).

``root`` is ``/`` on a real node; unit tests point it at a fake root (fake sysfs, /dev, /etc) and give a
runner that records commands, so every step's planning can be checked without touching the machine.
"""

from __future__ import annotations

import grp
import os
import pwd
import socket
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Tuple

from training_runtime.groups import COMPUTE, CONTROLLER, LOGIN, MAX_NAME_LENGTH, NAME_PATTERN, GroupSpec
from training_runtime.hyperpod_facts import HYPERPOD_MARKER as HYPERPOD_MARKER
from training_runtime.hyperpod_facts import IMDS_ENDPOINT, SLURM_PREFIX
from training_runtime.node_names import INSTANCE_NAMES, Naming, decide_naming, slurm_name
from training_runtime.options import RuntimeOptions, parse_options
from training_runtime.params import ProvisioningParameters
from training_runtime.paths import CLUSTER_AGENT_CONFIG_PATH, CLUSTERS_DIR, RUNTIME_DIR_ON_SHARED
from training_runtime.resources import (
    Instance,
    ResourceConfig,
    ResourceConfigError,
    instance_type_of,
    resolve_instance_types,
)
from training_runtime.retry import RetryPolicy
from training_runtime.run import DEFAULT_TIMEOUT_S, Result, Runner

GENERIC = "generic"
HYPERPOD = "hyperpod"


@dataclass(frozen=True)
class SlurmLayout:
    conf_dir: str
    bin_dir: Optional[str]
    """Where Slurm's commands live; None means they are on PATH."""
    sbin_dir: Optional[str]

    def command(self, name: str, daemon: bool = False) -> str:
        directory = self.sbin_dir if daemon else self.bin_dir
        return "{}/{}".format(directory, name) if directory else name


GENERIC_SLURM = SlurmLayout(conf_dir="/etc/slurm", bin_dir=None, sbin_dir=None)
HYPERPOD_SLURM = SlurmLayout(
    conf_dir=SLURM_PREFIX + "/etc", bin_dir=SLURM_PREFIX + "/bin", sbin_dir=SLURM_PREFIX + "/sbin"
)
SLURM_LAYOUTS = {GENERIC: GENERIC_SLURM, HYPERPOD: HYPERPOD_SLURM}
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""Searched after PATH: Slurm starts prologs and health checks with an almost empty environment."""


def platform_at(root: Path) -> str:
    """``hyperpod`` when HyperPod's marker is under ``root``, else ``generic``."""
    return HYPERPOD if (root / HYPERPOD_MARKER.lstrip("/")).exists() else GENERIC


def which_under(root: Path, name: str, extra_dirs: Sequence[str] = ()) -> Optional[str]:
    """Absolute path (on the node) of an executable under ``root``: ``extra_dirs``, PATH, then the system dirs."""
    dirs = [*extra_dirs, *os.environ.get("PATH", "").split(":"), *SYSTEM_PATH.split(":")]
    for directory in dirs:
        if not directory:
            continue
        candidate = "{}/{}".format(directory.rstrip("/"), name)
        host = root / candidate.lstrip("/")
        if host.is_file() and os.access(str(host), os.X_OK):
            return candidate
    return None


IMDS = IMDS_ENDPOINT + "/latest"
"""EC2 instance metadata (IMDSv2): a flexible group's node asks it for its own type when the resource config
names none per instance."""


DAEMON_WAIT = RetryPolicy(attempts=60, base_s=0.05, cap_s=0.5, deadline_s=30.0)
"""How long a daemon started without systemd may take to write its pid file (or to go away)."""
CONTROLLER_WAIT = RetryPolicy(attempts=None, base_s=0.5, cap_s=5.0, deadline_s=900.0)
"""How long a daemon that needs the controller may take to write its pid file: a configless slurmd
(``--conf-server``) writes it only once the controller's slurmctld has answered, and in the lifecycle-driven mode
every node runs its lifecycle script at once, so the controller's may still be starting Slurm (seen on the local
cluster under load: 30 s was too short)."""


class Host:
    """What the runtime asks the machine itself: account IDs, its host name, how long daemons take.

    Injected into :class:`Node` like the command runner; unit tests on a fake root pass a stand-in.
    """

    daemon_wait: RetryPolicy = DAEMON_WAIT
    controller_wait: RetryPolicy = CONTROLLER_WAIT

    def ids(self, owner: str, group: Optional[str]) -> Tuple[int, int]:
        """uid and gid of ``owner`` and ``group`` (default: the owner's primary group)."""
        entry = pwd.getpwnam(owner)
        gid = grp.getgrnam(group).gr_gid if group else entry.pw_gid
        return entry.pw_uid, gid

    def group_id(self, name: str) -> Optional[int]:
        """The gid of group ``name`` (NSS: /etc/group, or a directory service), or None when there is none."""
        try:
            return grp.getgrnam(name).gr_gid
        except KeyError:
            return None

    def hostname(self) -> str:
        return socket.gethostname().split(".")[0]

    def instance_type(self) -> Optional[str]:
        """This machine's type from EC2 instance metadata, as SageMaker spells it (``ml.`` prefix); None when
        the metadata service does not answer."""
        try:
            token_request = urllib.request.Request(
                IMDS + "/api/token", method="PUT", headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"}
            )
            with urllib.request.urlopen(token_request, timeout=2) as reply:
                token = reply.read().decode()
            request = urllib.request.Request(
                IMDS + "/meta-data/instance-type", headers={"X-aws-ec2-metadata-token": token}
            )
            with urllib.request.urlopen(request, timeout=2) as reply:
                value = str(reply.read().decode()).strip()
        except (OSError, ValueError):
            return None
        if not value:
            return None
        return value if value.startswith("ml.") else "ml." + value


@dataclass
class Node:
    params: ProvisioningParameters
    resources: ResourceConfig
    group: GroupSpec
    instance: Instance
    assets_dir: Path
    root: Path = Path("/")
    runner: Runner = field(default_factory=Runner)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    host: Host = field(default_factory=Host)
    warnings: Tuple[str, ...] = ()
    """What reading the inputs had to ignore or guess (``__main__.load_node``); :attr:`notes` adds the naming's."""
    options: RuntimeOptions = field(init=False)
    _own_type: Optional[str] = field(default=None, init=False, repr=False)
    _naming: Optional[Naming] = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        # Every step sees each group's instance type, also one the parameters file leaves to the resource config.
        self.params = resolve_instance_types(self.params, self.resources)
        self.group = self.params.group(self.group.name) or self.group
        self.options = parse_options(self.params.options)

    # --- identity --------------------------------------------------------------------------
    @property
    def instance_type(self) -> str:
        """This node's own instance type. In a flexible group nodes differ: the resource config's
        ``Instances[].InstanceType``, else EC2 instance metadata; it must be one of the group's candidates."""
        if self._own_type is None:
            found = instance_type_of(self.params, self.instance)
            source = "resource config"
            if found is None:
                found, source = self.host.instance_type(), "EC2 instance metadata"
            candidates = self.group.instance_types
            if found is None or (candidates and found not in candidates):
                raise ResourceConfigError(
                    [
                        "instance {!r} of flexible group {!r}: {} ({}). Fix: check that the cluster was deployed "
                        "from the same config as the parameters file".format(
                            self.instance.name,
                            self.group.name,
                            "no InstanceType in the resource config and no answer from EC2 instance metadata"
                            if found is None
                            else "the {} says {!r}".format(source, found),
                            "allowed: " + ", ".join(candidates) if candidates else "no candidate types",
                        )
                    ]
                )
            self._own_type = found
        return self._own_type

    @property
    def role(self) -> str:
        return self.group.role

    @property
    def is_controller(self) -> bool:
        return self.role == CONTROLLER

    @property
    def is_login(self) -> bool:
        return self.role == LOGIN

    @property
    def is_compute(self) -> bool:
        return self.role == COMPUTE

    @property
    def naming(self) -> Naming:
        """How Slurm names nodes in this cluster: instance names on the generic platform (the runtime renders
        slurm.conf); on HyperPod ``cluster_agent.json`` where the node has it, else a guess that says so
        (:func:`training_runtime.node_names.decide_naming`)."""
        if self._naming is None:
            if self.platform == GENERIC:
                self._naming = Naming(INSTANCE_NAMES, "the generic platform (the runtime writes slurm.conf)")
            else:
                agent_config = self.path(CLUSTER_AGENT_CONFIG_PATH)
                self._naming = decide_naming(agent_config, self.hostname, self.instance.name, self.instance.address)
        return self._naming

    def slurm_name_of(self, instance: Instance) -> str:
        """``instance``'s Slurm node name in this cluster (:attr:`naming`)."""
        return slurm_name(self.naming.mode, instance.name, instance.address)

    @property
    def slurm_name(self) -> str:
        """This node's Slurm node name."""
        return self.slurm_name_of(self.instance)

    @property
    def notes(self) -> Tuple[str, ...]:
        """Every warning about this node's inputs, for the log and the plan."""
        return self.warnings + ((self.naming.warning,) if self.naming.warning else ())

    @property
    def controllers(self) -> Tuple[Instance, ...]:
        """Every instance of the controller group: the first is the primary slurmctld, the others are its backups
        in takeover order (HyperPod's multi-head controllers). The order is the resource config's, except that
        the addresses its ``SlurmConfig`` names (``PrimaryControllerIp``, then ``SecondaryControllerIps``) come
        first: HyperPod's own word on which controller is the primary."""
        instances = tuple(self.resources.instances(self.params.controller_group))
        if not instances:
            raise RuntimeError(
                "resource config lists no instance in the controller group {!r}".format(self.params.controller_group)
            )
        rank: Dict[str, int] = {}
        for address in (self.resources.primary_controller_ip, *self.resources.secondary_controller_ips):
            if address:
                rank.setdefault(address, len(rank))
        return tuple(sorted(instances, key=lambda i: rank.get(i.address, len(rank))))

    @property
    def controller(self) -> Instance:
        """The primary controller instance (the first of the controller group)."""
        return self.controllers[0]

    @property
    def multi_head(self) -> bool:
        """The controller group has backup controllers: slurmctld's state lives on shared storage."""
        return len(self.controllers) > 1

    @property
    def is_primary_controller(self) -> bool:
        """This node is the primary controller, the one that creates cluster-wide secrets."""
        return self.is_controller and self.instance.name == self.controller.name

    # --- platform ---------------------------------------------------------------------------
    @property
    def platform(self) -> str:
        return platform_at(self.root)

    @property
    def slurm(self) -> SlurmLayout:
        return SLURM_LAYOUTS[self.platform]

    @property
    def has_shared_storage(self) -> bool:
        """The generic platform always needs one (the munge key is shared there); HyperPod only with FSx."""
        return self.platform == GENERIC or self.params.has_fsx

    @property
    def has_systemd(self) -> bool:
        return self.path("/run/systemd/system").is_dir()

    @property
    def hostname(self) -> str:
        """This machine's host name."""
        return self.host.hostname()

    # --- paths ------------------------------------------------------------------------------
    def path(self, absolute: str) -> Path:
        """``absolute`` under this node's root."""
        return self.root / absolute.lstrip("/")

    @property
    def cluster_identity(self) -> str:
        """The cluster's name as HyperPod gives it (``ClusterConfig.ClusterName``: a published template's launches
        each have their own), else the parameters file's: what the runtime's state on shared storage is marked with
        and, on a shared file system, named after. A name outside HyperPod's grammar is refused, never put in a
        path."""
        name = self.resources.cluster_name or self.params.cluster_name
        if not NAME_PATTERN.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
            raise ResourceConfigError(
                [
                    "ClusterConfig.ClusterName: got {!r}; expected HyperPod's cluster name grammar (1-63 letters, "
                    "digits and hyphens, starting and ending with a letter or digit)".format(name)
                ]
            )
        return name

    @property
    def shared_dir(self) -> str:
        """Absolute path (on the node) of the cluster-wide runtime directory on shared storage: ``.hyperpod-cdk``
        on the mount, or ``.hyperpod-cdk/clusters/<cluster>`` when other clusters share the file system."""
        base = "{}/{}".format(self.params.fsx_mount_path.rstrip("/"), RUNTIME_DIR_ON_SHARED)
        return "{}/{}/{}".format(base, CLUSTERS_DIR, self.cluster_identity) if self.params.shared_file_system else base

    @property
    def homes_dir(self) -> str:
        """Absolute path (on the node) of the directory holding the users' homes: the parameters' homes directory,
        or ``<it>/.clusters/<cluster>`` when other clusters share the file system (no user name starts with a dot,
        so no home of a cluster that shares the legacy layout is in the way)."""
        base = self.params.homes_dir.rstrip("/") or "/"
        if not self.params.shared_file_system:
            return base
        return "{}/.{}/{}".format(base.rstrip("/"), CLUSTERS_DIR, self.cluster_identity)

    # --- commands ---------------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        check: bool = True,
        env: Optional[Mapping[str, str]] = None,
        input: Optional[str] = None,
        secret_output: bool = False,
    ) -> Result:
        return self.runner.run(argv, timeout=timeout, check=check, env=env, input=input, secret_output=secret_output)

    def which(self, name: str, extra_dirs: Sequence[str] = ()) -> Optional[str]:
        """Absolute path (on the node) of a command, searching PATH under the node's root."""
        return which_under(self.root, name, extra_dirs)
