"""The one contract between the CDK constructs and the node runtime.

The constructs produce this file into the lifecycle-script prefix; every node reads it at boot.
HyperPod's own keys (``version``, ``workload_manager``, ``controller_group``, ``login_group``,
``worker_groups``, ``fsx_dns_name``, ``fsx_mountname``) keep the names and shapes HyperPod reads;
everything of ours lives under the single key ``hyperpod_cdk``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from training_runtime.billing_weights import InstancePrice
from training_runtime.directory import Directory, parse_directory
from training_runtime.emulation import EMULATION_KEY, Emulation, parse_emulation
from training_runtime.errors import InputError
from training_runtime.group_rules import group_problems
from training_runtime.groups import CAPACITIES, COMPUTE, CONTROLLER, LOGIN, GroupSpec
from training_runtime.login_pool.params import LOGIN_POOL_KEY, LoginPoolParams, parse_login_pool
from training_runtime.mount_paths import mount_path_problem
from training_runtime.rest.params import REST_API_KEY, RestApiParams, parse_rest_api
from training_runtime.scaling import parse_scaling
from training_runtime.team_model import Teams
from training_runtime.teams import parse_teams

CONTRACT_VERSION = 2
"""Version of the ``hyperpod_cdk`` section; bump it when a key changes meaning. Each version and each additive key
within one: CHANGELOG.md, 0.1.0's "Contract history"."""

HYPERPOD_PARAMETERS_VERSION = "1.0.0"
OUR_KEY = "hyperpod_cdk"

LIFECYCLE_DRIVEN = "lifecycle-driven"
API_DRIVEN = "api-driven"
MODES = (API_DRIVEN, LIFECYCLE_DRIVEN)

PARAMETERS_FILE_BY_MODE = {
    # HyperPod's agent reads provisioning_parameters.json from the lifecycle prefix in this mode.
    LIFECYCLE_DRIVEN: "provisioning_parameters.json",
    # AWS's migration guide says to remove provisioning_parameters.json once Slurm is configured
    # through the API, so the runtime's copy of the contract gets a name HyperPod does not read.
    API_DRIVEN: "hyperpod_cdk_parameters.json",
}

DEFAULT_FSX_MOUNT_PATH = "/fsx"
"""Where the shared file system is mounted unless the config says otherwise."""

ENTRYPOINT_BY_MODE = {LIFECYCLE_DRIVEN: "on_create.sh", API_DRIVEN: "on_init_complete.sh"}

SLURMDBD_BY_RUNTIME = "runtime"
SLURMDBD_BY_HYPERPOD = "hyperpod"
SLURMDBD_OWNERS = (SLURMDBD_BY_RUNTIME, SLURMDBD_BY_HYPERPOD)
"""Who configures and runs slurmdbd on the controller (``hyperpod_cdk.slurmdbd_owner``)."""


class ParametersError(InputError):
    """The parameters file is malformed; ``problems`` lists every one of them."""

    subject = "provisioning parameters"


INSECURE_SCHEMES = ("http://",)
"""The agent signs its requests with SigV4: never over plain HTTP. (The values are otherwise checked only for
being non-empty strings: at synth they are CloudFormation values, resolved at deploy.)"""


@dataclass(frozen=True)
class MetricsTarget:
    """``hyperpod_cdk.metrics``: where every node remote-writes its metrics (Amazon Managed Service for
    Prometheus), written by the constructs; the node signs with SigV4 for ``region``."""

    remote_write_url: str
    region: str


@dataclass(frozen=True)
class WorkerGroup:
    """HyperPod's ``worker_groups[]`` entry: a compute group and its Slurm partition."""

    instance_group_name: str
    partition_name: str


@dataclass(frozen=True)
class ProvisioningParameters:
    """Everything a node needs beyond HyperPod's ``resource_config.json``."""

    cluster_name: str
    mode: str
    groups: Tuple[GroupSpec, ...]
    fsx_dns_name: Optional[str] = None
    fsx_mountname: Optional[str] = None
    fsx_mount_path: str = DEFAULT_FSX_MOUNT_PATH
    fsx: Optional[bool] = None
    """Whether the cluster has FSx mounted at ``fsx_mount_path``, said explicitly (``hyperpod_cdk.fsx``).

    None (the key absent) means what files without the key always meant: FSx exactly when ``fsx_dns_name``
    is given. A published template writes ``True`` with null names in API-driven mode, where HyperPod
    mounts the file system itself and its DNS name is only known at deploy time."""
    openzfs_mount_path: Optional[str] = None
    """Where HyperPod mounts FSx for OpenZFS (``hyperpod_cdk.openzfs_mount_path``); None: no OpenZFS. The users'
    homes live on it (:attr:`homes_dir`)."""
    shared_file_system: bool = False
    """``hyperpod_cdk.shared_file_system``: another cluster uses this cluster's file systems too (the config's
    ``storage.existing.shared`` or ``storage_openzfs.existing.shared``), so the runtime's state and the users' homes
    live in directories of this cluster's own (``Node.shared_dir``, ``Node.homes_dir``). Written only when true."""
    metrics: Optional[MetricsTarget] = None
    """Where the node's metrics go (``hyperpod_cdk.metrics``); None: no remote write."""
    slurmdbd_owner: str = SLURMDBD_BY_RUNTIME
    """``hyperpod``: HyperPod was given the external accounting database and configures slurmdbd itself (API-driven
    mode only); ``runtime``: the runtime's accounting steps do, when ``options.accounting`` is on."""
    options: Dict[str, Any] = field(default_factory=dict)
    """The runtime options (the config's ``runtime:`` section), kept as given; the node reads them with
    :func:`training_runtime.options.parse_options` (``Node.options``)."""
    teams: Optional[Teams] = None
    """``hyperpod_cdk.teams``: the config's teams and ``enforce_accounts`` (Slurm accounts, QOS, budgets), applied
    by the controller's ``slurm-teams`` step; None (the key absent): none, and nothing enforced."""
    directory: Optional[Directory] = None
    """``hyperpod_cdk.directory``: the LDAP directory every node resolves users from (SSSD); None (the key absent):
    none. It names the bind password's secret, never the password."""
    emulation: Optional[Emulation] = None
    rest_api: Optional[RestApiParams] = None
    """``hyperpod_cdk.rest_api``: Slurm's REST API on the controller (:mod:`training_runtime.rest`); None: off."""
    login_pool: Optional[LoginPoolParams] = None
    """``hyperpod_cdk.login_pool``: the login nodes' shared host keys and health endpoint behind one load balancer
    (:mod:`training_runtime.login_pool`); None: off."""
    prices: Dict[str, InstancePrice] = field(default_factory=dict)
    """Instance type -> price per hour and its source (config ``cost``): the partitions' ``TRESBillingWeights``
    (:mod:`training_runtime.billing_weights`). Empty: Slurm's default billing."""
    """``hyperpod_cdk.emulation``: written only by the local cluster (:mod:`training_runtime.emulation`); None on
    a deployed cluster."""

    # --- derived views, HyperPod's vocabulary -------------------------------------------------
    @property
    def controller_group(self) -> str:
        return next(g.name for g in self.groups if g.role == CONTROLLER)

    @property
    def login_group(self) -> Optional[str]:
        return next((g.name for g in self.groups if g.role == LOGIN), None)

    @property
    def worker_groups(self) -> List[WorkerGroup]:
        return [WorkerGroup(g.name, g.partition or g.name) for g in self.groups if g.role == COMPUTE]

    @property
    def file_name(self) -> str:
        """Object name under the lifecycle prefix (depends on the Slurm mode)."""
        return PARAMETERS_FILE_BY_MODE[self.mode]

    @property
    def has_fsx(self) -> bool:
        """FSx is mounted at ``fsx_mount_path`` on every node (the explicit flag, else a DNS name given)."""
        return self.fsx if self.fsx is not None else self.fsx_dns_name is not None

    @property
    def homes_dir(self) -> str:
        """The directory of every cluster's users' homes: the OpenZFS mount itself (``/home/<user>``) when there is
        one, else ``home`` on the Lustre mount (``/fsx/home/<user>``). A cluster on a shared file system keeps its
        own below it (``Node.homes_dir``)."""
        if self.openzfs_mount_path is not None:
            return self.openzfs_mount_path.rstrip("/") or "/"
        return "{}/home".format(self.fsx_mount_path.rstrip("/"))

    @property
    def emulated_hardware(self) -> bool:
        """The local cluster declares the types' devices without having them (``hyperpod_cdk.emulation``)."""
        return self.emulation is not None and self.emulation.hardware

    @property
    def slurmdbd_by_hyperpod(self) -> bool:
        return self.slurmdbd_owner == SLURMDBD_BY_HYPERPOD

    def group(self, name: str) -> Optional[GroupSpec]:
        return next((g for g in self.groups if g.name == name), None)

    # --- serialisation ------------------------------------------------------------------------
    def to_json(self) -> Dict[str, Any]:
        """The file's content. Values may be CDK tokens when called at synth time."""
        data: Dict[str, Any] = {
            "version": HYPERPOD_PARAMETERS_VERSION,
            "workload_manager": "slurm",
            "controller_group": self.controller_group,
            "worker_groups": [
                {"instance_group_name": w.instance_group_name, "partition_name": w.partition_name}
                for w in self.worker_groups
            ],
        }
        if self.login_group is not None:
            data["login_group"] = self.login_group
        if self.fsx_dns_name is not None:
            data["fsx_dns_name"] = self.fsx_dns_name
            data["fsx_mountname"] = self.fsx_mountname
        data[OUR_KEY] = {
            "contract_version": CONTRACT_VERSION,
            "cluster_name": self.cluster_name,
            "mode": self.mode,
            "fsx_mount_path": self.fsx_mount_path,
            "groups": [
                {
                    "name": g.name,
                    "role": g.role,
                    "instance_type": g.instance_type,
                    "partition": g.partition,
                    "threads_per_core": g.threads_per_core,
                    # Only for flexible groups: files of fixed-type clusters stay as they were.
                    **({"instance_types": list(g.instance_types)} if g.instance_types else {}),
                    **({"capacity": g.capacity} if g.capacity is not None else {}),
                    **({"scaling": g.scaling.to_json()} if g.scaling is not None else {}),
                }
                for g in self.groups
            ],
            "options": dict(self.options),
        }
        if self.fsx is not None:
            data[OUR_KEY]["fsx"] = self.fsx
        if self.openzfs_mount_path is not None:
            data[OUR_KEY]["openzfs_mount_path"] = self.openzfs_mount_path
        if self.shared_file_system:  # only then: other clusters' files stay as they were
            data[OUR_KEY]["shared_file_system"] = True
        if self.metrics is not None:
            target = self.metrics
            data[OUR_KEY]["metrics"] = {"remote_write_url": target.remote_write_url, "region": target.region}
        if self.slurmdbd_by_hyperpod:  # only then: other clusters' files stay as they were
            data[OUR_KEY]["slurmdbd_owner"] = self.slurmdbd_owner
        if self.teams is not None:  # only then: other clusters' files stay as they were
            data[OUR_KEY]["teams"] = self.teams.to_json()
        if self.rest_api is not None:  # only then: other clusters' files stay as they were
            data[OUR_KEY][REST_API_KEY] = self.rest_api.to_json()
        if self.login_pool is not None:  # only then: other clusters' files stay as they were
            data[OUR_KEY][LOGIN_POOL_KEY] = self.login_pool.to_json()
        if self.directory is not None:  # only then: other clusters' files stay as they were
            data[OUR_KEY]["directory"] = self.directory.to_json()
        if self.emulation is not None:
            data[OUR_KEY][EMULATION_KEY] = self.emulation.to_json()
        if self.prices:  # only then: other clusters' files stay as they were
            data[OUR_KEY]["prices"] = {
                t: {"per_hour": p.per_hour, "source": p.source} for t, p in sorted(self.prices.items())
            }
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, data: Any) -> "ProvisioningParameters":
        """Parse and validate; raises :class:`ParametersError` naming every problem."""
        problems: List[str] = []
        if not isinstance(data, Mapping):
            raise ParametersError(["top level: expected a JSON object, got {}".format(type(data).__name__)])
        ours = data.get(OUR_KEY)
        if not isinstance(ours, Mapping):
            raise ParametersError(
                [
                    "{}: missing or not an object; this file was not produced by hyperpod-cdk. "
                    "Fix: deploy the lifecycle scripts with the hyperpod-cdk constructs".format(OUR_KEY)
                ]
            )
        version = ours.get("contract_version")
        if version != CONTRACT_VERSION:
            problems.append(
                "{}.contract_version: got {!r}; this runtime reads version {}. Fix: deploy the runtime "
                "and the parameters from the same hyperpod-cdk release".format(OUR_KEY, version, CONTRACT_VERSION)
            )
        cluster_name = _required_str(ours, "cluster_name", OUR_KEY, problems)
        mode = ours.get("mode")
        if mode not in MODES:
            problems.append("{}.mode: got {!r}; allowed: {}".format(OUR_KEY, mode, ", ".join(MODES)))
        groups = _parse_groups(ours.get("groups"), OUR_KEY + ".groups", problems)
        mount_path = ours.get("fsx_mount_path", DEFAULT_FSX_MOUNT_PATH)
        openzfs_mount_path = ours.get("openzfs_mount_path")
        checked = [mount_path_problem(OUR_KEY + ".fsx_mount_path", mount_path, "/fsx")]
        if openzfs_mount_path is not None:
            checked.append(mount_path_problem(OUR_KEY + ".openzfs_mount_path", openzfs_mount_path, "/home"))
        problems.extend(problem for problem in checked if problem is not None)
        shared = ours.get("shared_file_system", False)
        if not isinstance(shared, bool):
            problems.append("{}.shared_file_system: got {!r}; expected true, false or absent".format(OUR_KEY, shared))
        options = ours.get("options", {})
        if not isinstance(options, Mapping):
            problems.append("{}.options: got {!r}; expected an object".format(OUR_KEY, options))
            options = {}
        dns, mount_name = data.get("fsx_dns_name"), data.get("fsx_mountname")
        if (dns is None) != (mount_name is None):
            problems.append("fsx_dns_name and fsx_mountname: give both or neither")
        for key, value in (("fsx_dns_name", dns), ("fsx_mountname", mount_name)):
            if value is not None and (not isinstance(value, str) or not value):
                problems.append("{}: got {!r}; expected a non-empty string".format(key, value))
        fsx = ours.get("fsx")
        if fsx is not None and not isinstance(fsx, bool):
            problems.append("{}.fsx: got {!r}; expected true, false or absent".format(OUR_KEY, fsx))
        elif fsx is False and dns is not None:
            problems.append(
                "{}.fsx: false, but fsx_dns_name is {!r}. Fix: remove fsx_dns_name and fsx_mountname, or set "
                "{}.fsx to true".format(OUR_KEY, dns, OUR_KEY)
            )
        elif fsx is True and dns is None and mode == LIFECYCLE_DRIVEN:
            problems.append(
                "fsx_dns_name and fsx_mountname: required when {}.fsx is true in lifecycle-driven mode (the "
                "runtime mounts the file system itself). Fix: give the file system's DNS and mount names, or "
                "use api-driven mode, where HyperPod mounts it".format(OUR_KEY)
            )
        metrics = _parse_metrics(ours.get("metrics"), OUR_KEY + ".metrics", problems)
        emulation = parse_emulation(ours.get(EMULATION_KEY), OUR_KEY + "." + EMULATION_KEY, problems)
        prices = _parse_prices(ours.get("prices", {}), OUR_KEY + ".prices", problems)
        slurmdbd_owner = ours.get("slurmdbd_owner", SLURMDBD_BY_RUNTIME)
        if slurmdbd_owner not in SLURMDBD_OWNERS:
            problems.append(
                "{}.slurmdbd_owner: got {!r}; allowed: {}, or absent (the runtime)".format(
                    OUR_KEY, slurmdbd_owner, ", ".join(SLURMDBD_OWNERS)
                )
            )
        elif slurmdbd_owner == SLURMDBD_BY_HYPERPOD and mode != API_DRIVEN:
            problems.append(
                "{}.slurmdbd_owner: hyperpod, but mode is {!r}: HyperPod is given the accounting database only in "
                "api-driven mode. Fix: regenerate the file with hyperpod-cdk".format(OUR_KEY, mode)
            )
        teams = _parse_teams_key(ours.get("teams"), OUR_KEY + ".teams", problems)
        rest_api = parse_rest_api(ours.get(REST_API_KEY), OUR_KEY + "." + REST_API_KEY, problems)
        login_pool = parse_login_pool(ours.get(LOGIN_POOL_KEY), OUR_KEY + "." + LOGIN_POOL_KEY, problems)
        try:
            directory = parse_directory(ours.get("directory"), OUR_KEY + ".directory")
        except ValueError as error:
            problems.extend(str(error).splitlines())
            directory = None
        if problems:
            raise ParametersError(problems)
        params = cls(
            cluster_name=cluster_name or "",
            mode=str(mode),
            groups=tuple(groups),
            fsx_dns_name=dns,
            fsx_mountname=mount_name,
            fsx_mount_path=str(mount_path),
            fsx=fsx,
            metrics=metrics,
            openzfs_mount_path=openzfs_mount_path,
            shared_file_system=shared is True,
            slurmdbd_owner=str(slurmdbd_owner),
            options=dict(options),
            emulation=emulation,
            teams=teams,
            rest_api=rest_api,
            login_pool=login_pool,
            directory=directory,
            prices=prices,
        )
        _check_hyperpod_keys_agree(data, params, problems)
        if problems:
            raise ParametersError(problems)
        return params

    @classmethod
    def loads(cls, text: str) -> "ProvisioningParameters":
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ParametersError(["not valid JSON: {}".format(error)]) from None
        return cls.from_json(data)


def _required_str(data: Mapping[str, Any], key: str, path: str, problems: List[str]) -> Optional[str]:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        problems.append("{}.{}: got {!r}; expected a non-empty string".format(path, key, value))
        return None
    return value


def _parse_teams_key(raw: Any, path: str, problems: List[str]) -> Optional[Teams]:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) - {"enforce_accounts", "teams"}:
        problems.append("{}: got {!r}; expected an object with enforce_accounts and teams".format(path, raw))
        return None
    try:
        return parse_teams(raw.get("teams"), raw.get("enforce_accounts", False), None, path + ".teams")
    except ValueError as error:
        problems.extend(str(error).splitlines())
        return None


def _parse_prices(raw: Any, path: str, problems: List[str]) -> Dict[str, InstancePrice]:
    if not isinstance(raw, Mapping):
        problems.append("{}: got {!r}; expected an object of instance type -> {{per_hour, source}}".format(path, raw))
        return {}
    prices = {}
    for name, entry in raw.items():
        value = entry.get("per_hour") if isinstance(entry, Mapping) else None
        source = entry.get("source") if isinstance(entry, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not isinstance(source, str):
            problems.append(
                "{}.{}: got {!r}; expected {{per_hour: a number >= 0, source: text}}".format(path, name, entry)
            )
            continue
        prices[str(name)] = InstancePrice(float(value), source)
    return prices


def _parse_metrics(raw: Any, path: str, problems: List[str]) -> Optional[MetricsTarget]:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append("{}: got {!r}; expected an object with remote_write_url and region, or null".format(path, raw))
        return None
    before = len(problems)
    for key in raw:
        if key not in ("remote_write_url", "region"):
            problems.append("{}.{}: unknown key; allowed: remote_write_url, region".format(path, key))
    url, region = raw.get("remote_write_url"), raw.get("region")
    if not isinstance(url, str) or not url or url.lower().startswith(INSECURE_SCHEMES):
        problems.append(
            "{}.remote_write_url: got {!r}; expected an https:// URL such as https://aps-workspaces.<region>."
            "amazonaws.com/workspaces/<id>/api/v1/remote_write. Fix: regenerate the parameters with "
            "hyperpod-cdk".format(path, url)
        )
    if not isinstance(region, str) or not region:
        problems.append("{}.region: got {!r}; expected an AWS Region such as us-east-1".format(path, region))
    if len(problems) != before:
        return None
    return MetricsTarget(str(url), str(region))


def _parse_groups(raw: Any, path: str, problems: List[str]) -> List[GroupSpec]:
    if not isinstance(raw, list) or not raw:
        problems.append("{}: got {!r}; expected a non-empty list of groups".format(path, raw))
        return []
    groups: List[GroupSpec] = []
    for index, item in enumerate(raw):
        where = "{}[{}]".format(path, index)
        if not isinstance(item, Mapping):
            problems.append("{}: got {!r}; expected an object".format(where, item))
            continue
        before = len(problems)
        name = _required_str(item, "name", where, problems)
        role = _required_str(item, "role", where, problems)
        instance_type = item.get("instance_type")
        if instance_type is not None and (not isinstance(instance_type, str) or not instance_type):
            problems.append(
                "{}.instance_type: got {!r}; expected an instance type, or null when the node reads it from the "
                "resource config".format(where, instance_type)
            )
        partition = item.get("partition")
        if partition is not None and not isinstance(partition, str):
            problems.append("{}.partition: got {!r}; expected a string or null".format(where, partition))
        threads_per_core = item.get("threads_per_core", 1)
        if isinstance(threads_per_core, bool) or threads_per_core not in (1, 2):
            problems.append(
                "{}.threads_per_core: got {!r}; allowed: 1 (SMT off) or 2 (SMT on)".format(where, threads_per_core)
            )
        candidates = item.get("instance_types", [])
        if not isinstance(candidates, list) or not all(isinstance(t, str) and t for t in candidates):
            problems.append(
                "{}.instance_types: got {!r}; expected a list of instance types (a flexible group) or absent".format(
                    where, candidates
                )
            )
        elif candidates and instance_type is not None:
            problems.append(
                "{}: gives both instance_type {!r} and instance_types {!r}; a flexible group has only the list".format(
                    where, instance_type, candidates
                )
            )
        capacity = item.get("capacity")
        if capacity is not None and capacity not in CAPACITIES:
            problems.append(
                "{}.capacity: got {!r}; allowed: {}, or absent (HyperPod's default, on-demand)".format(
                    where, capacity, ", ".join(CAPACITIES)
                )
            )
        scaling = parse_scaling(item.get("scaling"), where + ".scaling", problems)
        if len(problems) == before:
            groups.append(
                GroupSpec(
                    str(name),
                    str(role),
                    instance_type,
                    partition,
                    int(threads_per_core),
                    tuple(candidates),
                    capacity=capacity,
                    scaling=scaling,
                )
            )
    if len(groups) == len(raw):
        problems.extend(group_problems(groups, path))
    return groups


def _check_hyperpod_keys_agree(data: Mapping[str, Any], params: ProvisioningParameters, problems: List[str]) -> None:
    """HyperPod's keys are a view of ours; a file where they disagree was edited by hand."""
    expected = params.to_json()
    for key in ("controller_group", "login_group", "worker_groups"):
        if data.get(key) != expected.get(key):
            problems.append(
                "{}: got {!r} but the groups in {} say {!r}. Fix: regenerate the file with hyperpod-cdk "
                "instead of editing it".format(key, data.get(key), OUR_KEY, expected.get(key))
            )
