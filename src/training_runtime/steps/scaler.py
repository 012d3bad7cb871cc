"""The capacity scaler on the primary controller, when some compute group has ``scaling`` (issue #24).

Writes the service's configuration (:data:`training_runtime.scaler.config.CONFIG_PATH`: the cluster's name, ARN
and region from HyperPod's resource config, the SageMaker endpoint — AWS's regional one, or the local cluster's
emulated control plane from ``hyperpod_cdk.emulation.sagemaker_url`` — the metadata service, the node naming and
the scaled groups), a program that runs ``python3 -m training_runtime scaler run``, and where the node has
systemd a unit; then keeps it running (:class:`RunningDaemon`: restarted when the configuration changes).
Without systemd (containers, the local cluster) it runs as a daemon with a pid file.
"""

from __future__ import annotations

from typing import List, Tuple

from training_runtime.errors import StepFailed
from training_runtime.files import file_matches, write_file
from training_runtime.node import Node
from training_runtime.paths import BIN_DIR
from training_runtime.scaler.cli import PID_FILE, PROCESS_NAME
from training_runtime.scaler.config import (
    CONFIG_PATH,
    DEFAULT_INTERVAL_S,
    MINUTE_S,
    ScaledGroupConfig,
    ScalerConfig,
    endpoint_of,
)
from training_runtime.scaler.policy import scaled_groups
from training_runtime.scaler.sagemaker import region_of
from training_runtime.services import Daemon
from training_runtime.spot import IMDS_URL
from training_runtime.steps import Step
from training_runtime.steps.daemon import RunningDaemon
from training_runtime.steps.installed import PACKAGE_NAME, program

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


class ScalerFiles(Step):
    """The scaler's configuration, its program and (with systemd) its unit."""

    name = "scaler"

    def files(self, node: Node) -> List[Tuple[str, str, int]]:
        files = [
            (CONFIG_PATH, scaler_config(node).dumps(), 0o600),
            (SCALER_PROGRAM, program("scaler run", module=PACKAGE_NAME), 0o755),
        ]
        if node.has_systemd:
            files.append((UNIT_FILE, service_unit(), 0o644))
        return files

    def stale(self, node: Node) -> List[str]:
        return [path for path, content, mode in self.files(node) if not file_matches(node, path, content, mode)]

    def needed(self, node: Node) -> bool:
        return bool(self.stale(node))

    def apply(self, node: Node) -> None:
        unit_changed = False
        for path, content, mode in self.files(node):
            changed = write_file(node, path, content, mode=mode)
            unit_changed = unit_changed or (changed and path == UNIT_FILE)
        if unit_changed:
            node.run(["systemctl", "daemon-reload"], timeout=120)

    def describe(self, node: Node) -> List[str]:
        groups = ", ".join("{} {}..{}".format(g.name, g.scaling.min, g.scaling.max) for g in scaler_config(node).groups)
        return ["write {} (scaled groups: {})".format(path, groups) for path in self.stale(node)]


def scaler_steps(node: Node) -> List[Step]:
    """On the primary controller only, and only when some compute group has ``scaling``."""
    if not (node.is_primary_controller and scaled_groups(node.params.groups)):
        return []
    config = [CONFIG_PATH, SCALER_PROGRAM] + ([UNIT_FILE] if node.has_systemd else [])
    return [ScalerFiles(), RunningDaemon(SCALER, config)]
