"""The runtime options' types: each section's dataclass (its fields' defaults and docstrings are the options'
meaning) and the constants the value rules judge them by.

The bottom of the options: :mod:`training_runtime.options` (the parser, which re-exports all of this) and
:mod:`training_runtime.option_rules` (the value rules) both import it, and it imports neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from training_runtime.errors import InputError

ACCOUNTING_DATABASES = ("local", "external")
HYPERPOD_HEALTH_ACTIONS = ("recover", "drain")
DCGM_LEVELS = (0, 1)
SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}$")
"""A Secrets Manager secret's ARN (the accounting password, the directory's bind password, the stack's secrets)."""
PIP_REQUIREMENT = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?(==|~=|>=|<=|<|>|!=)?[A-Za-z0-9.*+!_-]*$"
)
DB_USER = re.compile(r"^[A-Za-z0-9_]{1,32}$")
SLURM_MAJOR = re.compile(r"^\d{2}\.\d{2}$")
"""A Slurm release series as HyperPod's AMI names its directories (``/opt/slurm-25.11``)."""
VERSION = re.compile(r"^\d+\.\d+(\.\d+)?([a-z0-9.+]*)$")
MAX_SLURM_SECONDS = 65535
"""Slurm stores its timeouts in 16 bits (slurm.conf(5)); the renderer relies on it."""
MIN_CRED_EXPIRE = 70
"""Seconds. Below this a requeued job can be killed by a stale RPC meant for its previous incarnation."""
RETURN_TO_SERVICE = (0, 1, 2)
TCP_PORTS = range(1, 65536)
"""A TCP port: 1 to 65535 (the accounting database's ``port`` option; slurmdbd's ``StoragePort``)."""
SCRAPE_INTERVAL_DEFAULT = 15
SCRAPE_INTERVAL_RANGE = (5, 300)
"""Seconds: below 5 the collector's sinfo/squeue calls load slurmctld; above 300 dashboards go stale."""
ENROOT_CACHES = ("auto", "nvme", "shared")
"""Where enroot's image cache goes (``runtime.containers.enroot_cache``)."""
SHA256 = re.compile(r"^[0-9a-f]{64}$")
HTTPS_INDEX_URL = re.compile(r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%+/-]*)?$")
"""A pip index: https only (pip fetches wheels that run as root), no user name or token (it would sit in the
parameters file in the bucket), no query, nothing pip's argv would split on."""
RDS_CA_BUNDLE_URL = "https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem"
"""Amazon RDS's global certificate bundle: the URL the RDS user guide's sample script downloads ("Updating
applications to connect to DB instances using new SSL/TLS certificates")."""
HTTPS_URL = re.compile(r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?/[A-Za-z0-9._~/%+-]*\Z")
"""An https URL of a file, without a query, user info or characters a command line or a config file could misread."""
GROUP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")
"""A Unix group name as ``imds_groups`` takes it (whole string): letters, digits, ``_ . @ -``, not starting with
``-``, at most 64 characters (directory-service names such as ``hpc-users@example.com`` included)."""


class OptionsError(InputError):
    subject = "runtime options"


@dataclass(frozen=True)
class SlurmOptions:
    """Failure detection and requeue, written into the slurm.conf the runtime renders (generic platform
    only: on HyperPod's AMI HyperPod writes slurm.conf, and only ``health_check_interval``,
    ``login_node_jobs``, ``version`` and ``guard`` apply). The
    defaults are Slurm's except ``return_to_service`` (2; Slurm's is 0) and ``health_check_interval``
    (300 s; Slurm's 0 runs no health check)."""

    requeue: bool = True
    """``JobRequeue``: batch jobs on a failed node are requeued (``sbatch --no-requeue`` opts out)."""
    slurmd_timeout: int = 300
    """Seconds. ``SlurmdTimeout``: a node silent this long is set DOWN and its jobs are requeued."""
    message_timeout: int = 10
    """Seconds. ``MessageTimeout``: how long to wait for an RPC's reply."""
    cred_expire: int = 120
    """Seconds. ``AuthInfo=cred_expire=``: also the delay before a requeued job may start again. At least
    70: a job restarted sooner can be killed by a stale signal for its previous incarnation
    (docs/research/local-slurm.md)."""
    return_to_service: int = 2
    """``ReturnToService``: 0, 1 or 2 (Slurm's default is 0). 2: a DOWN node that registers again becomes
    available. 1: only nodes set DOWN for not responding do, and unexpected reboots are detected. 0: DOWN
    nodes stay DOWN."""
    sched_interval: int = 60
    """Seconds. ``SchedulerParameters=sched_interval=``: how often the main scheduler runs."""
    slurmctld_timeout: int = 120
    """Seconds. ``SlurmctldTimeout`` (Slurm's default, 120): with a backup controller (a controller group of
    two or more instances), how long the primary may be silent before the backup takes over."""
    health_check_interval: int = 300
    """Seconds (Slurm's default, 0, runs no health check). How often the health checks run:
    ``HealthCheckInterval`` in the rendered slurm.conf, and the interval of the health-check timer on
    HyperPod (with ``login_node_jobs`` and ``version``, the options of this section that apply there). No effect
    with ``health.enabled: false``."""
    login_node_jobs: bool = False
    """HyperPod only. HyperPod puts every node, login nodes included, in its universal ``dev`` partition, the
    default one, so batch jobs can land on a login node. ``false``: each login node's bootstrap drains it in
    Slurm (reason ``hyperpod-cdk:login-node: ...``; HyperPod's slurm.conf is not edited). ``true``: jobs may
    run there (a login node drained that way is resumed)."""
    version: Optional[str] = None
    """HyperPod only: the Slurm major the nodes run, ``24.11`` or ``25.11`` on AMIs that carry both
    (``/opt/slurm-<version>`` behind the ``/opt/slurm`` link). Null keeps the AMI's default. Lifecycle-driven mode
    only: the runtime switches the link before any Slurm daemon starts; in api-driven mode HyperPod starts Slurm
    before the script runs, so the config is refused (docs/node-runtime.md, "Slurm major")."""
    guard: bool = True
    """HyperPod only. The Slurm guard, a service on every node: within seconds of HyperPod's agent (or its AMI, or a
    lifecycle script) leaving Slurm's files in a known-broken state (a topology plugin without a topology, Pyxis
    loaded twice, a plugstack include configless nodes never get) it repairs the ones with a safe repair and reports
    the others, each logged, counted as a metric and alarmed (docs/node-runtime.md, "The Slurm guard", has the table
    of what it repairs and what it leaves). ``false``: not installed, and stopped where an earlier bootstrap
    started it."""


@dataclass(frozen=True)
class AccountingOptions:
    """Slurm accounting: slurmdbd on the controller and its database."""

    enabled: bool = False
    """Run slurmdbd on the controller and record jobs: ``sacct``, ``sreport`` and ``sshare`` work on every node,
    login nodes included, and record GPU use per job."""
    database: str = "local"
    """``local``: MariaDB on the controller, with a password generated there. ``external``: a
    MySQL-compatible database elsewhere (e.g. RDS)."""
    host: Optional[str] = None
    """The external database's endpoint (required with ``external``)."""
    port: int = 3306
    """The database's port, 1-65535."""
    user: str = "slurm"
    """The database user slurmdbd connects as (created on the controller for ``local``): 1-32 letters,
    digits and underscores."""
    password_secret_arn: Optional[str] = None
    """External databases only: a Secrets Manager secret whose string (or its ``password`` key) is the
    password. The controller reads it with the AWS CLI; ``HyperPodCluster`` grants the controller group's
    execution role, and no other, ``secretsmanager:GetSecretValue`` on this secret."""
    ca_bundle_url: str = RDS_CA_BUNDLE_URL
    """External databases only: where the controller downloads the certificate bundle that signs the database's
    server certificate (https only; default: Amazon RDS's global bundle). slurmdbd connects with TLS
    (``StorageParameters=SSL_CA=<the bundle>`` in slurmdbd.conf)."""
    ca_bundle_sha256: Optional[str] = None
    """External databases only, and required there: the sha256 of that bundle (``sha256sum``'s first field of a copy
    you downloaded and checked). The controller refuses a download with another sum, so the node never trusts a
    file nobody checked; when AWS publishes a new bundle, update the sum."""


@dataclass(frozen=True)
class PytorchOptions:
    """A PyTorch virtual environment on the shared file system, for login and compute nodes."""

    version: str
    """The exact PyTorch release, e.g. ``2.9.0``; every node gets ``torch==<version>``."""
    index_url: Optional[str] = None
    """The pip index for torch, e.g. ``https://download.pytorch.org/whl/cu121`` (null: PyPI); also an
    extra index for ``packages``. ``https://`` only, without credentials. Not used on Trainium nodes."""
    packages: Tuple[str, ...] = ()
    """More pip requirements (e.g. ``numpy==2.1.0``), installed with torch pinned."""
    smp: bool = False
    """SageMaker model parallelism v2 (``torch.sagemaker``). ``true`` is rejected: it ships only as a conda
    build and in the SMP container images, which a shared pip environment cannot host."""
    smddp: bool = False
    """SageMaker distributed data parallelism (the ``smddp`` process-group backend): install its wheel for
    this torch and Python."""


@dataclass(frozen=True)
class HealthOptions:
    """The node health checks (``training_runtime.health``): Slurm's HealthCheckProgram and Prolog."""

    enabled: bool = True
    """Install the checks on compute nodes. Generic platform: slurm.conf gets ``HealthCheckProgram``,
    ``HealthCheckNodeState=ANY,CYCLE``, ``Prolog``, ``PrologFlags=Alloc`` and ``nohold_on_prolog_fail``.
    HyperPod: a systemd timer runs the periodic check. ``false``: none of this (an existing HyperPod timer
    is removed)."""
    min_free_disk_gib: int = 10
    """GiB. A node needs this much free space on ``/``, ``/tmp`` and Slurm's spool directory (or 5 % of the
    file system, whichever is smaller); 0 turns the disk check off."""
    dcgm_level: int = 1
    """``dcgmi diag -r 1`` in the prolog on GPU nodes; 0 turns it off. Higher levels take minutes."""
    on_hyperpod: str = "recover"
    """HyperPod only. ``recover``: GPU, DCGM, Neuron and EFA failures ask HyperPod to reboot the node, and
    to replace it when the same check fails again within 24 h of that reboot; storage and disk failures
    only drain. ``drain``: every failure only drains."""


SPOT_NOTICE_S = 120
"""Seconds between EC2's Spot interruption notice and the interruption (EC2 User Guide)."""


@dataclass(frozen=True)
class SpotOptions:
    """The Spot interruption watcher on the compute nodes of groups with ``capacity: spot``
    (``training_runtime.spot``)."""

    enabled: bool = True
    """Run the watcher on Spot groups' compute nodes."""
    poll_interval: int = 5
    """Seconds between two reads of the interruption notice (AWS recommends 5)."""
    checkpoint_grace: int = 60
    """Seconds from signalling a job to checkpoint to requeueing it anyway; with ``poll_interval`` within
    EC2's two-minute notice."""


@dataclass(frozen=True)
class ObservabilityOptions:
    """Metrics on every node (``training_runtime.metrics``): exporters, the Slurm collector and, when the
    parameters file names a metrics target (``hyperpod_cdk.metrics``), a Prometheus agent that remote-writes
    to it with SigV4. Ports are fixed (``training_runtime/metrics/ports.py``)."""

    enabled: bool = True
    """Install and run the metrics software below. ``false``: none of it is installed (what an earlier
    bootstrap installed and started is left as it is)."""
    scrape_interval: int = SCRAPE_INTERVAL_DEFAULT
    """Seconds between two scrapes of the node's exporters, and between two runs of the metrics collector
    (Slurm state, EFA counters); 5 to 300."""
    node_exporter: bool = True
    """Prometheus' node_exporter on every node (CPU, memory, disk, network), port 9100; its textfile
    collector also serves the Slurm and EFA metrics, so those need it."""
    slurm_metrics: bool = True
    """The controller's collector of Slurm metrics (nodes by state with drain reasons, jobs by state and
    partition, the nodes of running jobs, allocated and idle CPUs and GPUs, scheduler cycle), from
    ``sinfo``, ``squeue`` and ``sdiag`` every ``scrape_interval`` seconds."""
    dcgm_exporter: bool = True
    """NVIDIA nodes: NVIDIA's dcgm-exporter (port 9400) with the runtime's counter list, and (generic
    platform) the GPU-to-job mapping written by the Slurm prolog and epilog (label ``hpc_job``)."""
    neuron_monitor: bool = True
    """Trainium/Inferentia nodes: ``neuron-monitor`` piped to its Prometheus bridge (port 8000)."""
    efa_metrics: bool = True
    """EFA nodes: the EFA devices' hardware counters (bytes, packets, RDMA traffic, drops) as metrics."""


@dataclass(frozen=True)
class ContainersOptions:
    """Containers on every node (``training_runtime.steps.containers``): enroot and pyxis for
    ``srun --container-image``, and Docker, as HyperPod's AMI ships them (docs/node-runtime.md, "Containers").
    The runtime edits only the keys it owns and never deletes data."""

    enabled: bool = True
    """Tune what is on the node: enroot's runtime, data, temp and cache paths, and Docker's ``data-root``, move off
    the root volume onto the instance store (``/opt/dlami/nvme``, else ``/opt/sagemaker``) where they are not there
    yet (the AMI's values off the root volume are kept); a wildcard include in ``plugstack.conf`` is made explicit; an
    installed pyxis is registered in ``plugstack.conf`` if it is not; on HyperPod ``ConstrainDevices=yes`` in
    ``cgroup.conf``. Installs nothing (see ``install_missing``). ``false``: containers are left to the AMI."""
    enroot_cache: str = "auto"
    """Where enroot keeps downloaded image layers (``ENROOT_CACHE_PATH``). ``auto``: keep the cache where it is when
    that is off the root volume (instance store or shared file system); else the instance store on NVMe, else
    ``<shared mount>/enroot``, else ``/opt/sagemaker``. ``nvme``: the node's instance-store volume. ``shared``:
    ``<shared mount>/enroot``, one cache for every node (needs a file system; AWS's sample's choice)."""
    docker_data_root: bool = True
    """Move Docker's ``data-root`` (``/etc/docker/daemon.json``; other keys are kept) to
    ``<instance store>/docker/data-root`` when it is on the root volume; images under the old root are not moved."""
    install_missing: bool = False
    """Install what is missing on nodes without the AMI's container stack (older AMIs, Debian or Ubuntu): enroot's
    pinned ``.deb`` packages and pyxis built from its pinned source against the node's Slurm headers, each checked
    against its sha256. Off by default: it downloads from GitHub and compiles on every node at boot."""
    enroot_sha256: Optional[str] = None
    """The sha256 of the pinned ``enroot`` package (``training_runtime/pins.py``), which the project could not
    verify: required with ``install_missing`` while the pin has none. Take it from the release you trust."""
    enroot_caps_sha256: Optional[str] = None
    """The same for the pinned ``enroot+caps`` package."""


@dataclass(frozen=True)
class SecurityOptions:
    """Who on a node may use what the node's instance role may do (docs/node-runtime.md, "Instance metadata: root
    only")."""

    imds_root_only: bool = True
    """Firewall rules on every node let only root (and ``imds_groups``) reach the EC2 instance metadata service, so
    jobs and logged-in users cannot read the instance role's credentials. Breaks what a job takes from it: the
    role's credentials (boto3 or the AWS CLI reaching S3, ECR or CloudWatch with the node's role), and the region,
    zone and instance identity (docs/limitations.md). ``false``: no rule, every process on a node can act as its
    role."""
    imds_groups: Tuple[str, ...] = ()
    """Unix groups whose members may also reach the metadata service (primary or supplementary group; iptables'
    ``--gid-owner`` with ``--suppl-groups``); each must exist on every node when the bootstrap runs. Everyone in
    them can act as the node's role."""


@dataclass(frozen=True)
class CheckpointOptions:
    """What the cluster's training jobs checkpoint, declared for ``validate`` (docs/training.md, "Memory budget").
    No node reads it: the job itself checks its actual state at start."""

    state_gib_per_node: Optional[int] = None
    """GiB of checkpoint state the ranks of one node stage together per asynchronous save (each rank's share of the
    state, summed over the node). ``validate`` refuses a value over the staging budget of a compute group's instance
    type: half its memory less the OS reserve. null: not declared, not checked."""


@dataclass(frozen=True)
class RuntimeOptions:
    """The parameters file's ``hyperpod_cdk.options``: the config's ``runtime:`` section."""

    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    """Failure detection and requeue settings written to slurm.conf."""
    accounting: AccountingOptions = field(default_factory=AccountingOptions)
    """Slurm accounting (slurmdbd) on the controller; off by default."""
    pytorch: Optional[PytorchOptions] = None
    """A PyTorch virtual environment on shared storage for login and compute nodes (null: none)."""
    health: HealthOptions = field(default_factory=HealthOptions)
    """Node health checks on compute nodes; on by default."""
    spot: SpotOptions = field(default_factory=SpotOptions)
    """The Spot interruption watcher on Spot groups' compute nodes; on by default."""
    observability: ObservabilityOptions = field(default_factory=ObservabilityOptions)
    """Metrics exporters and agent on every node; on by default."""
    containers: ContainersOptions = field(default_factory=ContainersOptions)
    """enroot, pyxis and Docker tuned off the root volume (and installed on request); on by default."""
    security: SecurityOptions = field(default_factory=SecurityOptions)
    """The instance metadata service for root only (and allowed groups); on by default."""
    checkpoint: CheckpointOptions = field(default_factory=CheckpointOptions)
    """The checkpoint size the jobs stage per node, for the memory budget check; not declared by default."""
    install_accelerator_software: bool = True
    """Install missing EFA / NVIDIA (fabric manager, DCGM) / Neuron software on nodes that have the
    hardware. ``false`` leaves it all to the AMI. NVIDIA drivers are never installed."""
    node_hardware: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    """Per instance type: replaces figures of the runtime's hardware table (``hardware.py``), or adds a type
    the table lacks."""
