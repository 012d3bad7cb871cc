"""Where things live on a node: the bottom layer that bootstrap steps and job-time tools both import.

The launcher, the health checks and the checkpoint helpers run long after bootstrap, so they must not
import bootstrap machinery (``plan``, ``steps``, ``apt``) for a path or a program name: those facts live
here, once.
"""

from __future__ import annotations

from training_runtime.hyperpod_facts import CLUSTER_AGENT_CONFIG_PATH as CLUSTER_AGENT_CONFIG_PATH
from training_runtime.hyperpod_facts import RESOURCE_CONFIG_PATH as RESOURCE_CONFIG_PATH
from training_runtime.hyperpod_facts import SLURM_LOG_DIR as SLURM_LOG_DIR
from training_runtime.hyperpod_facts import SLURMD_SPOOL_DIR as SLURMD_SPOOL_DIR

STATE_DIR = "/var/lib/hyperpod-cdk"
"""Per-node state: step results, the done marker, generated secrets (root only)."""
DONE_MARKER = STATE_DIR + "/bootstrap.done"
"""Written last by a bootstrap that converged; removed first by the next run."""
RUNTIME_DIR_ON_SHARED = ".hyperpod-cdk"
"""Directory on the shared file system for cluster-wide state (munge key, environments, locks)."""
CLUSTERS_DIR = "clusters"
"""Below ``RUNTIME_DIR_ON_SHARED`` (and, as ``.clusters``, below the homes directory): one directory per cluster
when clusters share a file system (``Node.shared_dir``, ``Node.homes_dir``)."""
OWNER_FILE = "cluster"
"""In the runtime's directory on shared storage: the name of the cluster whose state it holds
(``steps/storage.py``)."""

HOME = "/opt/hyperpod-cdk"
INSTALL_DIR = HOME + "/lib"
"""Holds the ``training_runtime`` package as installed on the node (not the lifecycle prefix's copy)."""
BIN_DIR = HOME + "/bin"
"""Programs Slurm runs (health check, prolog) and the ``hyperpod-launch`` wrapper."""
HEALTH_CHECK = BIN_DIR + "/health-check"
"""The periodic health check program (``HealthCheckProgram`` on the generic platform, a timer on HyperPod)."""
FACTS_PATH = "/etc/hyperpod-cdk/node.json"
"""The node's facts for job-time tools (:mod:`training_runtime.facts`)."""

# HyperPod's own paths (the resource config, cluster_agent.json, Slurm's log and spool directories) are facts about
# its AMI: training_runtime.hyperpod_facts defines them with their sources; they are imported above for the callers.
SLURMCTLD_STATE_DIR = "/var/spool/slurmctld"
"""slurmctld's ``StateSaveLocation`` with one controller (on its own disk), and Slurm's default where a
slurm.conf names none."""

FI_INFO = "/opt/amazon/efa/bin/fi_info"
"""libfabric's probe, as the EFA installer puts it."""
NEURON_LS = "/opt/aws/neuron/bin/neuron-ls"
DCGM_BINARY = "dcgmi"

PYTORCH_ENV_VARIABLE = "HYPERPOD_CDK_PYTORCH_ENV"
"""Names the cluster's PyTorch environment in login shells (set by the profile script bootstrap writes)."""

HEALTH_LOG = "/var/log/hyperpod-cdk/health.log"
"""Every health check run's JSON line (``training_runtime.health.cli``)."""

MUNGE_KEY = "/etc/munge/munge.key"
"""The node's copy of the cluster's munge key (munge-owned, 0400)."""
MUNGED_ARGV = ("runuser", "-u", "munge", "--", "/usr/sbin/munged")
"""munged as its package starts it, without systemd."""
MUNGED_PID_FILE = "/run/munge/munged.pid"
MUNGED_RUN_DIR = ("/run/munge", "munge", 0o755)
"""munged's socket directory: path, owner, mode."""

DB_SOCKET = "/run/mysqld/mysqld.sock"
"""The controller's MariaDB server socket (the accounting database)."""
MARIADBD_PID_FILE = "/run/mysqld/mysqld.pid"
MARIADBD_ARGV = (
    "start-stop-daemon",
    "--start",
    "--background",
    "--quiet",
    "--exec",
    "/usr/sbin/mariadbd",
    "--",
    "--user=mysql",
    "--datadir=/var/lib/mysql",
    "--socket=" + DB_SOCKET,
    "--pid-file=" + MARIADBD_PID_FILE,
    "--log-error=/var/log/mysql/error.log",
    "--bind-address=127.0.0.1",
)
"""MariaDB as the accounting step starts it without systemd (the emulator's AMI starts it the same way)."""
MARIADBD_RUN_DIR = ("/run/mysqld", "mysql", 0o755)
