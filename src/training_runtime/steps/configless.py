"""HyperPod's configless nodes get the controller's new Slurm configuration.

HyperPod runs slurmd on compute and login nodes configless (``slurmd --conf-server <controller>``; the
controller's slurm.conf sets ``SlurmctldParameters=enable_configless``; docs/node-runtime.md, "Configless
compute and login nodes"). Such a node keeps the slurm.conf, and the files it includes, that slurmctld sent
when its slurmd started, and its commands (``sacct``, ``sbatch``) read that copy. When the runtime changes a
file slurm.conf includes on the controller (``accounting.conf``) after those nodes started, ``scontrol
reconfigure`` sends them the new one (slurm.conf(5), ``enable_configless``: "on any 'scontrol reconfigure'
command new configs ... will be automatically pushed out"). Nodes that start later fetch it anyway.

Where the runtime itself starts slurmd under systemd (a HyperPod node in the lifecycle-driven mode), it gives
the AMI's slurmd unit ``--conf-server`` the way AWS's ``start_slurm.sh`` does, through ``SLURMD_OPTIONS``.
"""

from __future__ import annotations

from typing import List, Sequence

from training_runtime.errors import StepFailed
from training_runtime.files import read_text, write_file
from training_runtime.node import Node
from training_runtime.paths import STATE_DIR
from training_runtime.retry import NotReady, RetryPolicy
from training_runtime.steps import Step
from training_runtime.steps.daemon import config_digest
from training_runtime.steps.slurm import conf_servers

RECONFIGURE_WAIT = RetryPolicy(attempts=None, base_s=1.0, cap_s=5.0, deadline_s=120.0)
"""slurmctld was just (re)started: give it up to two minutes to answer."""


class ConfiglessPush(Step):
    """``scontrol reconfigure`` once per change of ``files`` (a digest recorded after each push)."""

    name = "slurm-configless-push"

    def __init__(self, files: Sequence[str]) -> None:
        self.files = tuple(files)

    @property
    def _digest_file(self) -> str:
        return STATE_DIR + "/configless-push.digest"

    def needed(self, node: Node) -> bool:
        return (read_text(node, self._digest_file) or "").strip() != config_digest(node, self.files)

    def apply(self, node: Node) -> None:
        digest = config_digest(node, self.files)
        argv = [node.slurm.command("scontrol"), "reconfigure"]

        def push() -> None:
            result = node.run(argv, check=False, timeout=60)
            if not result.ok:
                raise NotReady("scontrol reconfigure: {}".format((result.stderr or result.stdout).strip()))

        try:
            RECONFIGURE_WAIT.call(push, what="slurmctld to take scontrol reconfigure")
        except NotReady as error:
            raise StepFailed(
                "slurmctld did not take `scontrol reconfigure` within {} s ({}), so compute and login nodes keep "
                "their old copy of {}. Fix: check slurmctld's log, then run `scontrol reconfigure` on the "
                "controller".format(int(RECONFIGURE_WAIT.deadline_s), error, ", ".join(self.files))
            ) from None
        write_file(node, self._digest_file, digest + "\n", mode=0o600)

    def describe(self, node: Node) -> List[str]:
        return ["scontrol reconfigure: send {} to configless nodes".format(", ".join(self.files))]


SLURMD_DROP_IN = "/etc/systemd/system/slurmd.service.d/hyperpod-cdk-conf-server.conf"


class SlurmdConfServer(Step):
    """``SLURMD_OPTIONS="--conf-server <controllers>"`` for the AMI's slurmd unit, in a systemd drop-in.

    AWS's lifecycle scripts (``start_slurm.sh`` in base-config,
    https://github.com/aws-samples/awsome-distributed-training/tree/main/1.architectures/5.sagemaker-hyperpod/
    LifecycleScripts/base-config) start slurmd on compute and login nodes by substituting ``SLURMD_OPTIONS`` into
    the AMI's ``slurmd.service``, so its ``ExecStart`` names that variable; systemd fills it from this drop-in
    instead (a unit already rewritten with the value ignores it). [inferred: not run on a HyperPod AMI]
    """

    name = "slurmd-conf-server"

    def _content(self, node: Node) -> str:
        return "# Managed by hyperpod-cdk: slurmd fetches slurm.conf from the controllers (configless).\n" + (
            '[Service]\nEnvironment="SLURMD_OPTIONS=--conf-server {}"\n'.format(conf_servers(node))
        )

    def needed(self, node: Node) -> bool:
        return read_text(node, SLURMD_DROP_IN) != self._content(node)

    def apply(self, node: Node) -> None:
        write_file(node, SLURMD_DROP_IN, self._content(node))
        node.run(["systemctl", "daemon-reload"], timeout=120)

    def describe(self, node: Node) -> List[str]:
        return ["write {} (slurmd --conf-server {})".format(SLURMD_DROP_IN, conf_servers(node))]
