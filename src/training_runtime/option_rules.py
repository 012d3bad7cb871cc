"""The value rules of the ``runtime`` section: small named rules, one definition for synth and the node.

``hyperpod_cdk.rules`` registers them next to the construct-side rules; :func:`training_runtime.options.
options_problems` runs them after the shape check. Each takes the parsed options and the section's path.

Runs on the node's system Python (3.8 and newer), so: stdlib only, ``typing`` generics.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from training_runtime.option_types import (
    ACCOUNTING_DATABASES,
    DB_USER,
    DCGM_LEVELS,
    ENROOT_CACHES,
    GROUP_NAME,
    HTTPS_INDEX_URL,
    HTTPS_URL,
    HYPERPOD_HEALTH_ACTIONS,
    MAX_SLURM_SECONDS,
    MIN_CRED_EXPIRE,
    PIP_REQUIREMENT,
    RDS_CA_BUNDLE_URL,
    RETURN_TO_SERVICE,
    SCRAPE_INTERVAL_RANGE,
    SECRET_ARN,
    SHA256,
    SLURM_MAJOR,
    SPOT_NOTICE_S,
    TCP_PORTS,
    VERSION,
    RuntimeOptions,
)
from training_runtime.pins import ENROOT_DEBS, PYXIS_SOURCE
from training_runtime.problems import Problem, RuleBook
from training_runtime.rule_shapes import Located, Values, matches, one_of, within

OPTION_RULES = RuleBook("runtime options")
"""The value rules of the ``runtime`` section; each takes the parsed options and the section's path."""
_rule = OPTION_RULES.rule


def _fields(section: str, *names: str) -> Values:
    """The options ``section.name``, each with its path (none when the section is off, as ``pytorch: null``)."""

    def values(options: RuntimeOptions, path: str) -> Iterator[Located]:
        part = getattr(options, section)
        for name in names if part is not None else ():
            yield "{}.{}.{}".format(path, section, name), getattr(part, name)

    return values


slurm_seconds = _rule(
    "RT-SLURM-SECONDS",
    "runtime",
    "runtime.slurm.{slurmd_timeout,slurmctld_timeout,message_timeout,sched_interval,health_check_interval}",
    source="slurm.conf(5)",
)(
    within(
        "Slurm's timeouts and intervals are whole seconds from 1 to 65535.",
        _fields(
            "slurm", "slurmd_timeout", "slurmctld_timeout", "message_timeout", "sched_interval", "health_check_interval"
        ),
        1,
        MAX_SLURM_SECONDS,
        "expected whole seconds from {low} to {high} (Slurm keeps these in 16 bits)",
    )
)


@_rule("RT-SLURM-CRED-EXPIRE", "runtime", "runtime.slurm.cred_expire", source="docs/research/local-slurm.md")
def slurm_cred_expire(options: RuntimeOptions, path: str) -> Iterable[Problem]:
    """cred_expire is at least 70 s, so a requeued job is never killed by a stale signal for its last run."""
    value = options.slurm.cred_expire
    if value < MIN_CRED_EXPIRE:
        yield Problem(
            path + ".slurm.cred_expire",
            "must be at least {} s, because a requeued job restarted sooner can be killed by a stale signal for "
            "its previous incarnation (slurmctld retries RPCs to a failed node about 60 s later)".format(
                MIN_CRED_EXPIRE
            ),
            got=value,
            fix="use {} or more".format(MIN_CRED_EXPIRE),
        )
    elif value > MAX_SLURM_SECONDS:
        yield Problem(path + ".slurm.cred_expire", "expected at most {} s".format(MAX_SLURM_SECONDS), got=value)


slurm_return_to_service = _rule(
    "RT-SLURM-RETURN-TO-SERVICE", "runtime", "runtime.slurm.return_to_service", source="slurm.conf(5)"
)(one_of("ReturnToService is 0, 1 or 2.", _fields("slurm", "return_to_service"), RETURN_TO_SERVICE))
slurm_version = _rule(
    "RT-SLURM-VERSION",
    "runtime",
    "runtime.slurm.version",
    source="awslabs/awsome-distributed-ai PR #1107 (the AMI's /opt/slurm-24.11 and /opt/slurm-25.11)",
)(
    matches(
        "version names a Slurm release series the way HyperPod's AMI names its directories (24.11, 25.11).",
        _fields("slurm", "version"),
        SLURM_MAJOR,
        "expected a Slurm release series such as '24.11' or '25.11' (the AMI's /opt/slurm-<version>)",
        fix="use e.g. '25.11', or null to keep the AMI's default",
    )
)
accounting_database = _rule("RT-ACCOUNTING-DATABASE", "runtime", "runtime.accounting.database", source="hyperpod-cdk")(
    one_of(
        "The accounting database is local (MariaDB on the controller) or external.",
        _fields("accounting", "database"),
        ACCOUNTING_DATABASES,
    )
)


@_rule(
    "RT-ACCOUNTING-EXTERNAL",
    "runtime",
    "runtime.accounting.{host,password_secret_arn}",
    source="slurmdbd.conf(5); AWS Secrets Manager ARN format",
)
def accounting_external(options: RuntimeOptions, path: str) -> Iterable[Problem]:
    """An external database needs its host and the ARN of a Secrets Manager secret with its password."""
    accounting = options.accounting
    if accounting.database != "external" or not accounting.enabled:
        return
    if not accounting.host:
        yield Problem(
            path + ".accounting.host", "required when database is 'external'", fix="give the database endpoint"
        )
    arn = accounting.password_secret_arn
    if not arn or not SECRET_ARN.fullmatch(arn):
        yield Problem(
            path + ".accounting.password_secret_arn",
            "an external database needs the ARN of a Secrets Manager secret holding its password "
            "(arn:aws:secretsmanager:<region>:<account>:secret:<name>)",
            got=arn,
            fix="never put the password itself in the config",
        )


@_rule(
    "RT-ACCOUNTING-TLS",
    "runtime",
    "runtime.accounting.{ca_bundle_url,ca_bundle_sha256}",
    source="slurmdbd.conf(5) StorageParameters SSL_CA; Amazon RDS user guide (SSL/TLS certificate bundles)",
)
def accounting_tls(options: RuntimeOptions, path: str) -> Iterable[Problem]:
    """The database's CA bundle comes from an https URL and is checked against a sha256 of 64 hexadecimal digits
    (whether the sum is required: CL-ACCOUNTING-TLS)."""
    accounting = options.accounting
    url = accounting.ca_bundle_url
    if not isinstance(url, str) or not HTTPS_URL.match(url):
        yield Problem(
            path + ".accounting.ca_bundle_url",
            "expected an https URL of the certificate bundle (no query string, spaces or quotes)",
            got=url,
            fix="use e.g. " + RDS_CA_BUNDLE_URL,
        )
    digest = accounting.ca_bundle_sha256
    if digest is not None and (not isinstance(digest, str) or not SHA256.fullmatch(digest)):
        yield Problem(
            path + ".accounting.ca_bundle_sha256",
            "expected a sha256: 64 lower-case hexadecimal digits",
            got=digest,
            fix="give the first field of `sha256sum` of the bundle you downloaded and checked",
        )


@_rule("RT-ACCOUNTING-LOCAL", "runtime", "runtime.accounting", source="hyperpod-cdk")
def accounting_local(options: RuntimeOptions, path: str) -> Iterable[Problem]:
    """host, password_secret_arn and the CA bundle apply only to an external database."""
    accounting = options.accounting
    if accounting.database == "local" and (
        accounting.host
        or accounting.password_secret_arn
        or accounting.ca_bundle_sha256
        or accounting.ca_bundle_url != RDS_CA_BUNDLE_URL
    ):
        yield Problem(
            path + ".accounting",
            "host, password_secret_arn, ca_bundle_url and ca_bundle_sha256 apply only to database 'external'; the "
            "local database lives on the controller, reached over its socket, and its password is generated there",
            fix="remove them, or set database: external",
        )


accounting_user = _rule(
    "RT-ACCOUNTING-USER", "runtime", "runtime.accounting.user", source="MySQL user names; hyperpod-cdk"
)(
    matches(
        "The database user is 1-32 letters, digits and underscores.",
        _fields("accounting", "user"),
        DB_USER,
        "use 1-32 letters, digits and underscores",
    )
)
accounting_port = _rule(
    "RT-ACCOUNTING-PORT",
    "runtime",
    "runtime.accounting.port",
    source="TCP; AWS::SageMaker::Cluster ClusterAccountingDatabase.Port (1-65535)",
)(
    within(
        "The database port is 1-65535.",
        _fields("accounting", "port"),
        TCP_PORTS[0],
        TCP_PORTS[-1],
        "expected {low}-{high}",
    )
)
health_disk = _rule("RT-HEALTH-DISK", "runtime", "runtime.health.min_free_disk_gib", source="hyperpod-cdk")(
    within(
        "min_free_disk_gib is 0 (no disk check) or more.",
        _fields("health", "min_free_disk_gib"),
        0,
        None,
        "expected {low} (no disk check) or more GiB",
    )
)
health_dcgm = _rule("RT-HEALTH-DCGM", "runtime", "runtime.health.dcgm_level", source="NVIDIA DCGM diagnostics guide")(
    one_of(
        "dcgm_level is 0 (off) or 1: deeper levels run for minutes, longer than a prolog may take.",
        _fields("health", "dcgm_level"),
        DCGM_LEVELS,
        "allowed: 0 (off), 1. Levels 2 and up run for minutes, longer than a prolog should take",
        fix="use 1, and run deeper diagnostics on a drained node (dcgmi diag -r 3)",
    )
)
health_on_hyperpod = _rule("RT-HEALTH-ON-HYPERPOD", "runtime", "runtime.health.on_hyperpod", source="hyperpod-cdk")(
    one_of(
        "on_hyperpod is recover (ask HyperPod to reboot or replace) or drain.",
        _fields("health", "on_hyperpod"),
        HYPERPOD_HEALTH_ACTIONS,
    )
)


@_rule(
    "RT-SPOT-TIMING",
    "runtime",
    "runtime.spot.{poll_interval,checkpoint_grace}",
    source="EC2 User Guide: Spot Instance interruption notices",
)
def spot_timing(options: RuntimeOptions, path: str) -> Iterable[Problem]:
    """The watcher sees a notice and requeues a job within EC2's two-minute notice."""
    spot = options.spot
    if spot.poll_interval < 1 or spot.checkpoint_grace < 1:
        yield Problem(
            path + ".spot",
            "poll_interval and checkpoint_grace are whole seconds, at least 1",
            got={"poll_interval": spot.poll_interval, "checkpoint_grace": spot.checkpoint_grace},
        )
    elif spot.poll_interval + spot.checkpoint_grace >= SPOT_NOTICE_S:
        yield Problem(
            path + ".spot.checkpoint_grace",
            "poll_interval + checkpoint_grace must be under EC2's {} s notice, so a job that ignores the signal "
            "is still requeued before the instance goes".format(SPOT_NOTICE_S),
            got=spot.poll_interval + spot.checkpoint_grace,
            fix="lower checkpoint_grace (the default is 60 s with a 5 s poll_interval)",
        )


def _declared_size(options: RuntimeOptions, path: str) -> Iterator[Located]:
    return ((w, v) for w, v in _fields("checkpoint", "state_gib_per_node")(options, path) if v is not None)


checkpoint_size = _rule(
    "RT-CHECKPOINT-SIZE", "runtime", "runtime.checkpoint.state_gib_per_node", source="hyperpod-cdk"
)(
    within(
        "A declared checkpoint size per node is a whole number of GiB, 1 or more (null: not declared).",
        _declared_size,
        1,
        None,
        "expected whole GiB, {low} or more (the state every rank of a node stages together)",
        fix="round up to whole GiB, or remove it (null) to declare nothing",
    )
)


pytorch_version = _rule("RT-PYTORCH-VERSION", "runtime", "runtime.pytorch.version", source="hyperpod-cdk")(
    matches(
        "The PyTorch version is an exact release, so every node gets the same build.",
        _fields("pytorch", "version"),
        VERSION,
        "pin an exact release such as '2.13.0' so every node gets the same build",
    )
)


pytorch_index_url = _rule(
    "RT-PYTORCH-INDEX-URL", "runtime", "runtime.pytorch.index_url", source="hyperpod-cdk; pip --index-url"
)(
    matches(
        "The PyTorch index is an https:// URL without credentials: pip installs what it serves as root.",
        _fields("pytorch", "index_url"),
        HTTPS_INDEX_URL,
        "expected an https:// index URL without a user name, token or query, e.g. "
        "https://download.pytorch.org/whl/cu121",
        fix="use the index's https address; a private index's token belongs in the node's pip configuration, "
        "not in the config (it would be stored in the lifecycle bucket)",
    )
)


@_rule("RT-PYTORCH-SMP", "runtime", "runtime.pytorch.smp", source="SageMaker model parallelism v2 install guide")
def pytorch_smp(options: RuntimeOptions, path: str) -> Iterable[Problem]:
    """SMP v2 cannot live in a pip environment: it ships as a conda build and in SMP containers."""
    if options.pytorch is not None and options.pytorch.smp:
        yield Problem(
            path + ".pytorch.smp",
            "SageMaker model parallelism v2 ships only as a conda build of PyTorch and in the SMP container "
            "images (smdistributed-modelparallel), not as pip packages for a shared venv",
            fix="set smp to false and run SMP jobs in the SMP container (e.g. with enroot/pyxis)",
        )


def _packages(options: RuntimeOptions, path: str) -> Iterator[Located]:
    for index, requirement in enumerate(options.pytorch.packages if options.pytorch is not None else ()):
        yield "{}.pytorch.packages[{}]".format(path, index), requirement


pytorch_packages = _rule("RT-PYTORCH-PACKAGES", "runtime", "runtime.pytorch.packages[*]", source="PEP 508")(
    matches(
        "Each extra package is a pip requirement such as 'numpy==2.1.0'.",
        _packages,
        PIP_REQUIREMENT,
        "expected a pip requirement such as 'numpy==2.1.0'",
    )
)
observability_interval = _rule(
    "RT-OBSERVABILITY-INTERVAL",
    "runtime",
    "runtime.observability.scrape_interval",
    source="hyperpod-cdk; Prometheus scrape_config",
)(
    within(
        "scrape_interval is 5 to 300 s: shorter loads slurmctld with queries, longer leaves dashboards stale.",
        _fields("observability", "scrape_interval"),
        SCRAPE_INTERVAL_RANGE[0],
        SCRAPE_INTERVAL_RANGE[1],
        "expected whole seconds from {low} to {high}: the collector queries slurmctld that often",
    )
)


@_rule(
    "RT-OBSERVABILITY-TEXTFILE",
    "runtime",
    "runtime.observability.{slurm_metrics,efa_metrics}",
    source="node_exporter textfile collector",
)
def observability_textfile(options: RuntimeOptions, path: str) -> Iterable[Problem]:
    """Slurm and EFA metrics are served by node_exporter's textfile collector, so they need node_exporter."""
    metrics = options.observability
    if not metrics.enabled or metrics.node_exporter:
        return
    wanting = [name for name in ("slurm_metrics", "efa_metrics") if getattr(metrics, name)]
    if wanting:
        yield Problem(
            path + ".observability.node_exporter",
            "{} need node_exporter: its textfile collector serves them".format(" and ".join(wanting)),
            got=False,
            fix="set node_exporter to true, or set {} to false".format(" and ".join(wanting)),
        )


containers_cache = _rule(
    "RT-CONTAINERS-CACHE",
    "runtime",
    "runtime.containers.enroot_cache",
    source="awslabs/awsome-distributed-ai install_enroot_pyxis.sh (ENROOT_CACHE_PATH on NVMe, /opt/sagemaker or /fsx)",
)(
    one_of(
        "enroot_cache is auto, nvme (the instance store) or shared (the cluster's file system).",
        _fields("containers", "enroot_cache"),
        ENROOT_CACHES,
        fix="use auto (keep the AMI's choice when it is off the root volume), nvme or shared",
    )
)
containers_sha256 = _rule(
    "RT-CONTAINERS-SHA256",
    "runtime",
    "runtime.containers.{enroot_sha256,enroot_caps_sha256}",
    source="hyperpod-cdk (training_runtime/pins.py)",
)(
    matches(
        "A package checksum is 64 lower-case hexadecimal digits (``sha256sum``'s output).",
        _fields("containers", "enroot_sha256", "enroot_caps_sha256"),
        SHA256,
        "expected a sha256: 64 lower-case hexadecimal digits",
        fix="give the first field of `sha256sum <package>.deb`",
    )
)


@_rule(
    "RT-CONTAINERS-INSTALL",
    "runtime",
    "runtime.containers.install_missing",
    source="hyperpod-cdk (training_runtime/pins.py: no published checksum for the enroot packages)",
)
def containers_install(options: RuntimeOptions, path: str) -> Iterable[Problem]:
    """install_missing needs enabled, and a sha256 for every pinned download that has none in pins.py."""
    containers = options.containers
    if not containers.install_missing:
        return
    if not containers.enabled:
        yield Problem(
            path + ".containers.install_missing",
            "install_missing applies only with enabled: true",
            got=True,
            fix="set enabled: true, or install_missing: false",
        )
    for artifact in (*ENROOT_DEBS, PYXIS_SOURCE):
        if artifact.sha256 is None and artifact.option and getattr(containers, artifact.option) is None:
            yield Problem(
                "{}.containers.{}".format(path, artifact.option),
                "install_missing downloads {} and must check it, but no sha256 of it is published that the "
                "project could verify, so the pin in training_runtime/pins.py has none".format(artifact.url),
                got=None,
                fix="download it from a place you trust, run sha256sum on it, and give the sum here",
            )


@_rule(
    "RT-SECURITY-IMDS-GROUPS",
    "runtime",
    "runtime.security.imds_groups[*]",
    source="EC2 User Guide: Limit access to the Instance Metadata Service (allow rules for users or groups)",
)
def security_imds_groups(options: RuntimeOptions, path: str) -> Iterable[Problem]:
    """imds_groups names Unix groups, each once, and applies only while imds_root_only keeps the rule in place."""
    security = options.security
    where = path + ".security.imds_groups"
    if security.imds_groups and not security.imds_root_only:
        yield Problem(
            where,
            "applies only with imds_root_only: true; without the rule every user on a node already reaches the "
            "instance metadata service",
            got=list(security.imds_groups),
            fix="remove imds_groups, or set imds_root_only: true",
        )
    seen = set()
    for index, name in enumerate(security.imds_groups):
        if not GROUP_NAME.fullmatch(name):
            yield Problem(
                "{}[{}]".format(where, index),
                "expected a Unix group name: 1-64 letters, digits, '_', '.', '@' or '-', not starting with '-'",
                got=name[:80],
                fix="give the group's name as `getent group` prints it",
            )
        elif name in seen:
            yield Problem("{}[{}]".format(where, index), "names a group twice", got=name, fix="list each group once")
        seen.add(name)
