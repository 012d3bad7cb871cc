"""The guard's checks: what is broken in this node's Slurm files, and the text that repairs it where there is one.

:func:`inspect` reads the files of one node (a :class:`~training_runtime.guard.tree.Tree`) and returns
:class:`Finding` values named by the rows of :mod:`training_runtime.guard.table`. It writes nothing: whether a
finding is repaired is the table's word for the node's role, applied by :mod:`training_runtime.guard.service`.
On the controller the checks read HyperPod's own files (``<conf dir>``); on login and compute nodes the copy slurmd
received from the controller (``/var/spool/slurmd/conf-cache``, when it holds a slurm.conf: the configless nodes).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import List, Optional, Tuple

from training_runtime.guard import conf, plugstack
from training_runtime.guard.table import (
    BLOCK_POWER_DOWN,
    CONFIGLESS_INCLUDE,
    CONFIGLESS_MISSING,
    CONTROLLER,
    PYXIS_TWICE,
    TOPOLOGY_BLOCK,
    TOPOLOGY_TREE,
    TOPOLOGY_YAML,
)
from training_runtime.guard.tree import Tree

FLAT_SWITCH = "hyperpod-cdk-flat"
YAML_FROM = (25, 5)
"""Slurm reads ``topology.yaml`` from 25.05 on ("Slurm will first check for topology.yaml. If this file exists,
topology.conf will be ignored": topology.yaml(5)); older Slurm reads only ``topology.conf``."""
BLOCK_BUG = (25, 11)
TOPOLOGY_PLUGINS = ("topology/tree", "topology/block")


@dataclass(frozen=True)
class Finding:
    """One breakage found in one file."""

    check: str
    """The table row (:data:`training_runtime.guard.table.RULES`)."""
    path: str
    detail: str
    content: Optional[str] = None
    """The file's text that repairs it; None: there is no safe repair (reported only)."""
    refresh: bool = False
    """The repair only brings the guard's own earlier repair up to date (nodes joined or left)."""


@dataclass(frozen=True)
class Layout:
    """Where this node's Slurm files are."""

    conf_dir: str
    """HyperPod's Slurm configuration directory (``/opt/slurm/etc``)."""
    cache_dir: str
    """Where a configless slurmd keeps what the controller sent it."""


def flat_tree(nodes: List[str]) -> str:
    """``topology.conf`` with one switch over ``nodes`` (the guard's own file: its mark on the first line)."""
    return (
        "# {}: HyperPod set TopologyPlugin=topology/tree without a tree, so every node hangs off one switch.\n"
        "# HyperPod's own topology.conf replaces this file; the guard never touches one with a switch.\n"
        "SwitchName={} Nodes={}\n".format(conf.GUARD_MARK, FLAT_SWITCH, ",".join(nodes))
    )


def flat_yaml(names: List[str]) -> str:
    """``topology.yaml`` with a flat topology for each name (the first the cluster default), the guard's own."""
    lines = [
        "# {}: HyperPod left topology.yaml empty while slurm.conf names a topology, so each is flat.".format(
            conf.GUARD_MARK
        ),
        "# HyperPod's own topology.yaml replaces this file; the guard never touches one with a topology in it.",
    ]
    for index, name in enumerate(names or ["default"]):
        lines += ["- topology: {}".format(name), "  cluster_default: {}".format(str(index == 0).lower())]
        lines.append("  flat: true")
    return "\n".join(lines) + "\n"


def slurm_text(tree: Tree, directory: str) -> Optional[str]:
    """slurm.conf with the files it includes by name (HyperPod's ``accounting.conf``) appended, or None."""
    text = tree.read(directory + "/slurm.conf")
    if text is None:
        return None
    parts = [text]
    for target in conf.includes(text):
        if not conf.has_wildcard(target):
            parts.append(tree.read(conf.resolve(target, directory)) or "")
    return "\n".join(parts)


def topology(tree: Tree, directory: str, version: Optional[Tuple[int, int]]) -> List[Finding]:
    """The controller's topology findings (rows TOPOLOGY_*, BLOCK_POWER_DOWN)."""
    text = slurm_text(tree, directory)
    if text is None:
        return []
    plugin, tags = conf.topology_plugin(text), conf.partition_topologies(text)
    yaml_path, conf_path = directory + "/topology.yaml", directory + "/topology.conf"
    yaml_text = tree.read(yaml_path)
    reads_yaml = yaml_text is not None and (version is None or version >= YAML_FROM)
    found: List[Finding] = []
    if yaml_text is not None and reads_yaml:
        names = conf.yaml_topologies(yaml_text)
        wanted = flat_yaml(tags)
        if not names and (plugin in TOPOLOGY_PLUGINS or tags):
            what = "partitions name {}".format(", ".join(tags)) if tags else "TopologyPlugin={}".format(plugin)
            detail = "{} has no topology while {}".format(yaml_path, what)
            found.append(Finding(TOPOLOGY_YAML, yaml_path, detail, wanted))
        elif conf.ours(yaml_text) and yaml_text != wanted:
            detail = "the partitions' topologies changed ({})".format(", ".join(tags) or "none")
            found.append(Finding(TOPOLOGY_YAML, yaml_path, detail, wanted, refresh=True))
    elif plugin == "topology/tree":
        found += _tree(tree.read(conf_path), conf_path, conf.node_names(text))
    elif plugin == "topology/block":
        current = tree.read(conf_path)
        if current is None or conf.blocks(current) == 0:
            what = "is missing" if current is None else "names no block"
            detail = "TopologyPlugin=topology/block but {} {}".format(conf_path, what)
            found.append(Finding(TOPOLOGY_BLOCK, conf_path, detail))
    block = plugin == "topology/block" or (reads_yaml and conf.yaml_has_block(yaml_text or ""))
    if version == BLOCK_BUG and block and conf.suspending(text):
        detail = "Slurm 25.11 with block topology and SuspendTime={}".format(conf.setting(text, "SuspendTime"))
        found.append(Finding(BLOCK_POWER_DOWN, directory + "/slurm.conf", detail))
    return found


def _tree(current: Optional[str], path: str, nodes: List[str]) -> List[Finding]:
    wanted = flat_tree(nodes) if nodes else None
    if current is None or conf.switches(current) == 0:
        what = "is missing" if current is None else "names no switch"
        detail = "TopologyPlugin=topology/tree but {} {}".format(path, what)
        if wanted is None:
            detail += ", and slurm.conf names no node to hang off a switch"
        return [Finding(TOPOLOGY_TREE, path, detail, wanted)]
    if conf.ours(current) and wanted is not None and current != wanted:
        return [Finding(TOPOLOGY_TREE, path, "slurm.conf's nodes changed", wanted, refresh=True)]
    return []


def _reader(tree: Tree, directory: str):  # type: ignore[no-untyped-def]
    def read(target: str) -> Optional[List[str]]:
        path = conf.resolve(target, directory)
        files = tree.glob(path) if conf.has_wildcard(path) else [path]
        texts = [tree.read(p) for p in files]
        if not texts or any(t is None for t in texts):
            return None
        return [line for t in texts for line in (t or "").splitlines()]

    return read


def controller_plugstack(tree: Tree, directory: str) -> List[Finding]:
    """The controller's plugstack.conf: includes by a path copied in (configless), one Pyxis registration."""
    path = directory + "/plugstack.conf"
    text, slurm = tree.read(path), slurm_text(tree, directory)
    if text is None or slurm is None:
        return []
    read = _reader(tree, directory)
    wanted, added, _ = plugstack.inline(text, read) if conf.configless(slurm) else (text, [], [])
    wanted = plugstack.dedupe(wanted, read)[0]
    _, dropped, stuck = plugstack.dedupe(text, read)  # what the file loads twice now, not after copying
    found: List[Finding] = []
    if wanted != text:
        if added or not dropped:  # not added: a copy refreshed from its changed file
            detail = "includes by a path: {}".format(", ".join(added)) if added else "a copied include's file changed"
            found.append(Finding(CONFIGLESS_INCLUDE, path, detail, wanted, refresh=not added))
        if dropped:
            detail = "Pyxis registered again by: {}".format("; ".join(dropped))
            found.append(Finding(PYXIS_TWICE, path, detail, wanted))
    if stuck:
        detail = "Pyxis registered again in {}, among other plug-ins".format(", ".join(stuck))
        found.append(Finding(PYXIS_TWICE, path, detail))
    return found


def node_plugstack(tree: Tree, layout: Layout) -> List[Finding]:
    """A login or compute node's plugstack.conf (slurmd's copy where it is configless): reported, never edited."""
    configless = tree.exists(layout.cache_dir + "/slurm.conf")
    directory = layout.cache_dir if configless else layout.conf_dir
    path = directory + "/plugstack.conf"
    text = tree.read(path)
    if text is None:
        return []
    read = _reader(tree, directory)
    found: List[Finding] = []
    missing = [t for t in conf.includes(text) if read(t) is None]
    if configless and missing:
        detail = "{} includes {}, which this node does not have".format(path, ", ".join(missing))
        found.append(Finding(CONFIGLESS_MISSING, path, detail))
    _, dropped, stuck = plugstack.dedupe(text, read)
    if dropped or stuck:
        detail = "Pyxis registered more than once: {}".format("; ".join(dropped + stuck))
        found.append(Finding(PYXIS_TWICE, path, detail))
    return found


def inspect(role: str, tree: Tree, layout: Layout, version: Optional[Tuple[int, int]] = None) -> List[Finding]:
    """Everything broken in this node's Slurm files, by the table's rows."""
    if role == CONTROLLER:
        return topology(tree, layout.conf_dir, version) + controller_plugstack(tree, layout.conf_dir)
    return node_plugstack(tree, layout)


def watched(role: str, tree: Tree, layout: Layout) -> List[str]:
    """The directories whose changes the guard must notice: the Slurm files' own and those their includes name."""
    directory = layout.conf_dir if role == CONTROLLER else layout.cache_dir
    found = [layout.conf_dir, layout.conf_dir + "/plugstack.conf.d"]
    if role != CONTROLLER:
        found.append(layout.cache_dir)
    text = tree.read(directory + "/plugstack.conf") or ""
    for target in conf.includes(text) + plugstack.copied(text):
        found.append(posixpath.dirname(conf.resolve(target, directory)))
    return list(dict.fromkeys(found))
