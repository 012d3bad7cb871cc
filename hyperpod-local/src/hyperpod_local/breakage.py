"""HyperPod breaking Slurm on a running local cluster, the ways it broke real clusters in 2026 (the guard's drills).

``hyperpod-local break <kind>`` (:func:`break_slurm`) writes one broken state on the running cluster in the place of
HyperPod's agent, its AMI or a lifecycle script, then asks slurmctld to re-read it (``scontrol reconfigure`` in the
background, as the agent does; it does not wait, since a reconfigure over a missing ``topology.conf`` leaves
slurmctld deaf for up to 60 s). The kinds, each with the source that saw it (the guard's table,
``training_runtime.guard.table``, has the quotes):

* ``topology-missing``: slurm.conf keeps ``TopologyPlugin=topology/tree``, ``topology.conf`` is gone
  (aws-samples/sample-physical-ai-scaffolding-kit PR #14);
* ``topology-empty``: ``topology.conf`` holds no switch (sbatch: "Requested topology configuration is not
  available", seen on the emulator's Slurm 24.11);
* ``topology-yaml-empty``: an empty ``topology.yaml`` (``[]``) and ``topology.conf``, and the compute partitions
  tagged ``Topology=tree`` (PR #23, Slurm 25.11). Slurm reads ``topology.yaml`` from 25.05 on, so of the emulator's
  majors only 26.05 can play it; 25.11's crash itself is not reproduced (the emulator has no 25.11);
* ``pyxis-twice``: a lifecycle script's ``include <conf dir>/plugstack.conf.d/pyxis.conf`` appended to a
  plugstack.conf that loads the AMI's Pyxis already (awslabs/awsome-distributed-ai #1207);
* ``configless-plugstack``: the controller's plugstack.conf loads Pyxis through an include by a path, which the
  login and compute nodes do not have (PASK #5; SchedMD: configless ships no include with a path);
* ``topology-flat``: not a breakage but an operator's choice the guard must leave alone
  (``TopologyPlugin=topology/flat``, ``topology/default`` on 24.11, and no topology file: AWS's "To disable
  topology-aware placement").

The topology kinds stay the agent's way of writing until :func:`heal`: a node that joins or leaves meanwhile gets
slurm.conf and the topology file written the same broken way (:func:`topology_as_written`, which
:func:`hyperpod_local.membership.publish` applies), as HyperPod did while nodes came and went.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from hyperpod_local.hyperpod_files import SLURM_ETC, TOPOLOGY_CONF, slurm_conf, topology_conf
from hyperpod_local.state import ClusterHandle, LocalClusterError
from training_runtime.groups import COMPUTE, LOGIN

TOPOLOGY_MISSING = "topology-missing"
TOPOLOGY_EMPTY = "topology-empty"
TOPOLOGY_YAML_EMPTY = "topology-yaml-empty"
PYXIS_TWICE = "pyxis-twice"
CONFIGLESS_PLUGSTACK = "configless-plugstack"
TOPOLOGY_FLAT = "topology-flat"
KINDS = (TOPOLOGY_MISSING, TOPOLOGY_EMPTY, TOPOLOGY_YAML_EMPTY, PYXIS_TWICE, CONFIGLESS_PLUGSTACK, TOPOLOGY_FLAT)
TOPOLOGY_KINDS = (TOPOLOGY_MISSING, TOPOLOGY_EMPTY, TOPOLOGY_YAML_EMPTY, TOPOLOGY_FLAT)
"""The kinds that change how the agent writes slurm.conf and the topology file (kept until :func:`heal`)."""
YAML_MAJORS = ("26.05",)
"""The emulator's Slurm majors that read ``topology.yaml`` (Slurm 25.05 and later; the emulator has 24.11 and 26.05)."""
RECORD = "cluster/breakage.json"
"""Under the work directory: the topology kind the agent writes, while one is active."""
EMPTY_TOPOLOGY = "# topology.conf as HyperPod's agent left it: no switch (played by hyperpod-local)\n"
EMPTY_YAML = "[]\n"
PYXIS_INCLUDE = SLURM_ETC + "/plugstack.conf.d/pyxis.conf"
"""The file a lifecycle script includes to load Pyxis (AWS's ``install_enroot_pyxis.sh``; the emulated AMI's)."""


class BreakageError(LocalClusterError):
    """A breakage this cluster cannot play; the message names the kind, why, and what is allowed."""


def record(workdir: Path) -> str | None:
    """The topology kind the agent writes now, or None."""
    path = workdir / RECORD
    return str(json.loads(path.read_text())["kind"]) if path.exists() else None


def tagged(slurm_conf: str, partitions: tuple[str, ...], tag: str = "tree") -> str:
    """``slurm_conf`` with ``Topology=<tag>`` on the lines of ``partitions`` (25.11's per-partition topology)."""
    names = "|".join(re.escape(p) for p in partitions)
    return re.sub(rf"^(PartitionName=(?:{names})\s.*)$", rf"\1 Topology={tag}", slurm_conf, flags=re.MULTILINE)


def off_plugin(slurm: str) -> str:
    """The plugin that turns topology-aware placement off: ``topology/flat``, which Slurm 24.11 has not yet (it has
    ``topology/default``, which AWS names beside it)."""
    return "topology/default" if slurm == "24.11" else "topology/flat"


def flat(slurm_conf: str, slurm: str) -> str:
    """``slurm_conf`` with topology-aware placement turned off (:func:`off_plugin`)."""
    return re.sub(r"^TopologyPlugin=\S+", f"TopologyPlugin={off_plugin(slurm)}", slurm_conf, flags=re.MULTILINE)


def topology_as_written(cluster: ClusterHandle, slurm_conf: str, tree: str | None) -> tuple[str, str | None]:
    """(slurm.conf, topology.conf or None for none) as the agent writes them while a topology kind is active."""
    kind = record(cluster.workdir)
    if kind == TOPOLOGY_MISSING:
        return slurm_conf, None
    if kind in (TOPOLOGY_EMPTY, TOPOLOGY_YAML_EMPTY):
        return slurm_conf, EMPTY_TOPOLOGY
    if kind == TOPOLOGY_FLAT:
        return flat(slurm_conf, cluster.state.variant.slurm or ""), None
    return slurm_conf, tree


def break_slurm(cluster: ClusterHandle, kind: str, slurm: str) -> float:
    """Write ``kind`` on the running cluster (Slurm major ``slurm``); returns the wall-clock time of the write."""
    if kind not in KINDS:
        raise BreakageError(f"kind: got {kind!r}; allowed: {', '.join(KINDS)}")
    if kind == TOPOLOGY_YAML_EMPTY and slurm not in YAML_MAJORS:
        raise BreakageError(
            f"{kind}: Slurm {slurm} does not read topology.yaml (25.05 and later do). Fix: a cluster on Slurm "
            f"{' or '.join(YAML_MAJORS)} (hyperpod-local up --slurm {YAML_MAJORS[0]})"
        )
    controller = cluster.layout.controllers[0].name
    if kind in TOPOLOGY_KINDS:
        (cluster.workdir / RECORD).write_text(json.dumps({"kind": kind}) + "\n")
    conf = read(cluster, controller, f"{SLURM_ETC}/slurm.conf")
    plugstack = read(cluster, controller, f"{SLURM_ETC}/plugstack.conf")
    others = [n.name for n in cluster.layout.nodes if n.role in (COMPUTE, LOGIN) and cluster.namespaces.alive(n.name)]
    started = time.time()
    if kind in (TOPOLOGY_MISSING, TOPOLOGY_EMPTY, TOPOLOGY_FLAT):
        written, tree = topology_as_written(cluster, conf, "")
        if written != conf:
            write(cluster, controller, f"{SLURM_ETC}/slurm.conf", written)
        topology = f"{SLURM_ETC}/{TOPOLOGY_CONF}"
        if tree is None:
            run(cluster, controller, "rm", "-f", topology)
        else:
            write(cluster, controller, topology, tree)
    elif kind == TOPOLOGY_YAML_EMPTY:
        partitions = tuple(g.partition or g.name for g in cluster.layout.groups if g.role == COMPUTE)
        write(cluster, controller, f"{SLURM_ETC}/topology.yaml", EMPTY_YAML)
        write(cluster, controller, f"{SLURM_ETC}/{TOPOLOGY_CONF}", EMPTY_TOPOLOGY)
        write(cluster, controller, f"{SLURM_ETC}/slurm.conf", tagged(conf, partitions))
    elif kind == PYXIS_TWICE:
        write(cluster, controller, f"{SLURM_ETC}/plugstack.conf", plugstack + f"include {PYXIS_INCLUDE}\n")
    else:  # CONFIGLESS_PLUGSTACK
        for name in others:
            run(cluster, name, "rm", "-f", PYXIS_INCLUDE)
        write(cluster, controller, f"{SLURM_ETC}/plugstack.conf", f"include {PYXIS_INCLUDE}\n")
    reconfigure(cluster, controller)
    return started


def heal(cluster: ClusterHandle) -> None:
    """The agent writes HyperPod's files its normal way again: slurm.conf and topology.conf as at ``up`` (the same
    functions), no topology.yaml; then slurmctld is asked to re-read them (:func:`reconfigure`)."""
    (cluster.workdir / RECORD).unlink(missing_ok=True)
    controller = cluster.layout.controllers[0].name
    topology = cluster.state.variant.automatic_topology
    naming = cluster.state.variant.naming
    write(cluster, controller, f"{SLURM_ETC}/slurm.conf", slurm_conf(cluster.layout, naming, topology=topology))
    tree = topology_conf(cluster.layout, naming) if topology else None
    path = f"{SLURM_ETC}/{TOPOLOGY_CONF}"
    if tree is None:
        run(cluster, controller, "rm", "-f", path)
    else:
        write(cluster, controller, path, tree)
    run(cluster, controller, "rm", "-f", f"{SLURM_ETC}/topology.yaml")
    reconfigure(cluster, controller)


def reconfigure(cluster: ClusterHandle, controller: str) -> None:
    """``scontrol reconfigure`` in the background, as HyperPod's agent asks for it: the caller does not wait (over a
    missing topology.conf slurmctld would not answer for up to a minute)."""
    run(cluster, controller, "sh", "-c", "setsid scontrol reconfigure >/dev/null 2>&1 </dev/null &")


def read(cluster: ClusterHandle, node: str, path: str) -> str:
    result = cluster.exec(node, ["cat", path], timeout=30)
    if result.returncode != 0:
        raise BreakageError(f"node {node}: cannot read {path}: {result.stderr.strip()}")
    return result.stdout


def write(cluster: ClusterHandle, node: str, path: str, text: str) -> None:
    """Replace ``path`` on ``node`` the way HyperPod's agent does (a temporary file renamed over it)."""
    script = 'cat >"$0.tmp" && chmod 0644 "$0.tmp" && mv "$0.tmp" "$0"'
    result = cluster.exec(node, ["/bin/sh", "-c", script, path], input=text, timeout=30)
    if result.returncode != 0:
        raise BreakageError(f"node {node}: writing {path} failed: {result.stderr.strip()}")


def run(cluster: ClusterHandle, node: str, *argv: str) -> None:
    result = cluster.exec(node, list(argv), timeout=30)
    if result.returncode != 0:
        raise BreakageError(f"node {node}: {' '.join(argv)} failed: {(result.stderr or result.stdout).strip()}")
