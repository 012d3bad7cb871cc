"""The capacity scaler on the primary controller, when some compute group has ``scaling`` (issue #24).

Writes the service's configuration (:data:`training_runtime.scaler.config.CONFIG_PATH`: the cluster's name, ARN
and region from HyperPod's resource config, the SageMaker endpoint — AWS's regional one, or the local cluster's
emulated control plane from ``hyperpod_cdk.emulation.sagemaker_url`` — the metadata service, the node naming and
the scaled groups), a program that runs ``python3 -m training_runtime scaler run``, and where the node has
systemd a unit; then keeps it running (:class:`RunningDaemon`: restarted when the configuration changes).
Without systemd (containers, the local cluster) it runs as a daemon with a pid file.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from training_runtime.errors import StepFailed
from training_runtime.files import file_matches, read_text, write_file
from training_runtime.node import GENERIC, Node
from training_runtime.paths import BIN_DIR, STATE_DIR
from training_runtime.scaler.cli import PID_FILE, PROCESS_NAME
from training_runtime.scaler.config import (
    CONFIG_PATH,
    DEFAULT_INTERVAL_S,
    MINUTE_S,
    ScaledGroupConfig,
    ScalerConfig,
    endpoint_of,
)
from training_runtime.scaler.job_submit import (
    BLOCK,
    PLUGIN_KEY,
    SCRIPT_HEADER,
    SCRIPT_NAME,
    plugins_set_elsewhere,
    render_script,
    with_block,
)
from training_runtime.scaler.policy import scaled_groups
from training_runtime.scaler.sagemaker import region_of
from training_runtime.services import Daemon
from training_runtime.spot import IMDS_URL
from training_runtime.steps import Step
from training_runtime.steps.configless import ConfiglessPush
from training_runtime.steps.daemon import RunningDaemon, ServiceFiles
from training_runtime.steps.installed import PACKAGE_NAME, program
from training_runtime.steps.slurm import ACCOUNTING_INCLUDE, conf_path, includes_accounting

SCALER_PROGRAM = BIN_DIR + "/scaler"
UNIT = "hyperpod-cdk-scaler.service"
UNIT_FILE = "/etc/systemd/system/" + UNIT
SCALER = Daemon(name=PROCESS_NAME, unit=UNIT, argv=(SCALER_PROGRAM, "--daemon"), pid_file=PID_FILE)


def scaler_config(node: Node) -> ScalerConfig:
    """The service's configuration for this cluster; StepFailed when HyperPod's resource config has no ARN."""
    arn = node.resources.cluster_arn
    if not arn:
        raise StepFailed(
            "the scaler needs ClusterConfig.ClusterArn in HyperPod's resource config (its region and the heartbeat "
            "tag's resource); the file has none. Fix: check /opt/ml/config/resource_config.json on the controller"
        )
    emulation = node.params.emulation
    sagemaker_url = emulation.sagemaker_url if emulation is not None else None
    imds_url = emulation.imds_url if emulation is not None and emulation.imds_url else IMDS_URL
    # The local cluster's drills: a short cycle and a short idle minute (hyperpod_cdk.emulation); else AWS's.
    interval_s = emulation.scaler_interval_s if emulation is not None else None
    minute_s = emulation.scaler_minute_s if emulation is not None else None
    groups = tuple(
        ScaledGroupConfig(g.name, g.partition or g.name, g.scaling)
        for g in scaled_groups(node.params.groups)
        if g.scaling is not None
    )
    region = region_of(arn)
    return ScalerConfig(
        cluster_name=node.params.cluster_name,
        cluster_arn=arn,
        region=region,
        endpoint=endpoint_of(region, sagemaker_url),
        naming=node.naming.mode,
        groups=groups,
        imds_url=imds_url,
        slurm_bin=node.slurm.bin_dir or "",
        interval_s=interval_s or DEFAULT_INTERVAL_S,
        minute_s=minute_s or MINUTE_S,
    )


def service_unit() -> str:
    return (
        "# Installed by hyperpod-cdk: grows and shrinks scaled instance groups with the Slurm queue.\n"
        "[Unit]\nDescription=hyperpod-cdk capacity scaler\nAfter=slurmctld.service network-online.target\n\n"
        "[Service]\nExecStart={}\nRestart=always\nRestartSec=10\n\n"
        "[Install]\nWantedBy=multi-user.target\n".format(SCALER_PROGRAM)
    )


class ScalerFiles(ServiceFiles):
    """The scaler's configuration, its program and (with systemd) its unit."""

    name = "scaler"
    unit_file = UNIT_FILE

    def files(self, node: Node) -> List[Tuple[str, str, int]]:
        files = [
            (CONFIG_PATH, scaler_config(node).dumps(), 0o600),
            (SCALER_PROGRAM, program("scaler run", module=PACKAGE_NAME), 0o755),
        ]
        if node.has_systemd:
            files.append((UNIT_FILE, service_unit(), 0o644))
        return files

    def describe(self, node: Node) -> List[str]:
        groups = ", ".join("{} {}..{}".format(g.name, g.scaling.min, g.scaling.max) for g in scaler_config(node).groups)
        return ["write {} (scaled groups: {})".format(path, groups) for path in self.stale(node)]


def job_submit_files(node: Node) -> Tuple[str, str]:
    """``job_submit.lua`` next to slurm.conf (where slurm.conf(5) has ``JobSubmitPlugins=lua`` read it) and the
    included ``accounting.conf`` that gets the key."""
    return conf_path(node, SCRIPT_NAME), conf_path(node, ACCOUNTING_INCLUDE)


def job_submit_conflict(node: Node) -> Optional[str]:
    """Why the runtime leaves the job_submit plugin alone on this controller (None: it sets it up).

    The key goes where the runtime already adds keys to HyperPod's Slurm configuration: ``accounting.conf``, which
    HyperPod's slurm.conf includes and which its agent keeps when it rewrites slurm.conf for new nodes
    (:class:`~training_runtime.steps.slurm.HyperPodAccounting`); slurm.conf itself is HyperPod's. AWS does not
    document ``JobSubmitPlugins`` on HyperPod, so an existing setting or script is never replaced."""
    script, include = job_submit_files(node)
    slurm_conf = read_text(node, conf_path(node, "slurm.conf")) or ""
    if node.platform == GENERIC:
        return "the generic platform's slurm.conf has no accounting.conf include"
    if not includes_accounting(slurm_conf):
        return "{} does not include {}".format(conf_path(node, "slurm.conf"), ACCOUNTING_INCLUDE)
    for path, text in ((conf_path(node, "slurm.conf"), slurm_conf), (include, read_text(node, include) or "")):
        if plugins_set_elsewhere(text):
            return "{} already sets {}".format(path, PLUGIN_KEY)
    existing = read_text(node, script)
    if existing is not None and not existing.startswith(SCRIPT_HEADER):
        return "{} exists and is not hyperpod-cdk's".format(script)
    return None


LEFT_ALONE = (
    "job_submit plugin not set up ({}): while a scaled group is at 0, Slurm refuses sbatch/salloc for its "
    'partition; submit with --hold and `scontrol release` the job (docs/scaler.md, "A group at 0")'
)


class JobSubmitHold(Step):
    """``job_submit.lua`` (:func:`~training_runtime.scaler.job_submit.render_script`) and ``JobSubmitPlugins=lua``
    in the included accounting.conf, so a job for a scaled group at 0 is held instead of refused."""

    name = "scaler-job-submit"

    def _wanted(self, node: Node) -> List[Tuple[str, str]]:
        script, include = job_submit_files(node)
        pairs = [(g.partition, g.name) for g in scaler_config(node).groups]
        return [(script, render_script(pairs)), (include, with_block(read_text(node, include) or ""))]

    def needed(self, node: Node) -> bool:
        if job_submit_conflict(node) is not None:
            return False
        return any(not file_matches(node, path, content, 0o644) for path, content in self._wanted(node))

    def apply(self, node: Node) -> None:
        for path, content in self._wanted(node):
            write_file(node, path, content, mode=0o644)

    def describe(self, node: Node) -> List[str]:
        script, include = job_submit_files(node)
        key = BLOCK.split("\n")[1]
        return ["write {} (hold jobs for a scaled group at 0) and {} in {}".format(script, key, include)]

    def left_alone(self, node: Node) -> List[str]:
        conflict = job_submit_conflict(node)
        return [LEFT_ALONE.format(conflict)] if conflict is not None else []


class JobSubmitPush(ConfiglessPush):
    """``scontrol reconfigure`` once the script or the key changed: slurmctld loads the plugin (Slurm 24.11's
    reconfigure restarts slurmctld with the new configuration) and configless nodes get the new accounting.conf."""

    name = "scaler-job-submit-reconfigure"

    @property
    def _digest_file(self) -> str:
        return STATE_DIR + "/job-submit-push.digest"

    def needed(self, node: Node) -> bool:
        return job_submit_conflict(node) is None and super().needed(node)


def scaler_steps(node: Node) -> List[Step]:
    """On the primary controller only, and only when some compute group has ``scaling``."""
    if not (node.is_primary_controller and scaled_groups(node.params.groups)):
        return []
    config = [CONFIG_PATH, SCALER_PROGRAM] + ([UNIT_FILE] if node.has_systemd else [])
    hold: List[Step] = [JobSubmitHold(), JobSubmitPush(job_submit_files(node))]
    return [ScalerFiles(), *hold, RunningDaemon(SCALER, config)]
