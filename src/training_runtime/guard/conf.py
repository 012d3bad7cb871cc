"""Reading the Slurm files the guard watches: slurm.conf's keys, the topology files, plugstack.conf's lines.

Pure text in, facts out (stdlib only: no YAML parser on the node, so ``topology.yaml`` is read for what the guard
needs, the names of its topologies and whether one is a block). Comments start at ``#`` (slurm.conf(5),
plugstack's SPANK lines and YAML alike); keys are case-insensitive, as Slurm reads them.
"""

from __future__ import annotations

import posixpath
import re
from typing import List, Optional, Tuple

GUARD_MARK = "Written by the hyperpod-cdk Slurm guard"
"""The first line of every file the guard writes whole (a comment), so it knows its own files from HyperPod's."""
PYXIS_PLUGIN = "spank_pyxis.so"
"""Pyxis's SPANK plug-in's file name (the same fact as ``training_runtime.hyperpod_facts.PYXIS_PLUGIN``)."""
DISABLED_SUSPEND = ("-1", "none", "infinite")
INCLUDE = re.compile(r"^[ \t]*include[ \t]+(\S+)[ \t]*$", re.IGNORECASE)
PLUGIN = re.compile(r"^[ \t]*(required|optional)[ \t]+(\S+)", re.IGNORECASE)


def active(line: str) -> str:
    """The line without its comment, stripped."""
    return line.split("#", 1)[0].strip()


def ours(text: Optional[str]) -> bool:
    """Whether ``text`` is a file the guard wrote (its mark in the first line)."""
    return text is not None and GUARD_MARK in text.split("\n", 1)[0]


def setting(text: str, key: str) -> Optional[str]:
    """The last value of ``key`` in a Slurm ``key=value`` file (None when no uncommented line sets it)."""
    pattern = re.compile(r"(?:^|\s){}\s*=\s*(\S+)".format(re.escape(key)), re.IGNORECASE)
    found = None
    for line in text.splitlines():
        for match in pattern.finditer(active(line)):
            found = match.group(1)
    return found


def topology_plugin(slurm_conf: str) -> Optional[str]:
    """``TopologyPlugin``, lower case (None: not set)."""
    value = setting(slurm_conf, "TopologyPlugin")
    return value.lower() if value else None


def configless(slurm_conf: str) -> bool:
    """``SlurmctldParameters`` holds ``enable_configless``."""
    value = setting(slurm_conf, "SlurmctldParameters") or ""
    return "enable_configless" in [v.strip().lower() for v in value.split(",")]


def suspending(slurm_conf: str) -> bool:
    """Power saving is on: ``SuspendTime`` set to a time (slurm.conf(5): -1 or INFINITE turns it off)."""
    value = setting(slurm_conf, "SuspendTime")
    return value is not None and value.lower() not in DISABLED_SUSPEND


def _lines_starting(text: str, key: str) -> List[str]:
    prefix = re.compile(r"^{}\s*=".format(re.escape(key)), re.IGNORECASE)
    return [line for line in map(active, text.splitlines()) if prefix.match(line)]


def node_names(slurm_conf: str) -> List[str]:
    """Every ``NodeName=`` value (host lists kept as written), ``DEFAULT`` left out, in file order."""
    names = []
    for line in _lines_starting(slurm_conf, "NodeName"):
        value = line.split(None, 1)[0].split("=", 1)[1]
        if value and value.upper() != "DEFAULT" and value not in names:
            names.append(value)
    return names


def partition_topologies(slurm_conf: str) -> List[str]:
    """The topology names the partitions' ``Topology=`` give (Slurm 25.11's per-partition topology), in order."""
    names: List[str] = []
    for line in _lines_starting(slurm_conf, "PartitionName"):
        for match in re.finditer(r"(?:^|\s)Topology\s*=\s*(\S+)", line, re.IGNORECASE):
            if match.group(1) not in names:
                names.append(match.group(1))
    return names


def switches(topology_conf: str) -> int:
    """``SwitchName=`` lines of a topology.conf."""
    return len(_lines_starting(topology_conf, "SwitchName"))


def blocks(topology_conf: str) -> int:
    """``BlockName=`` lines of a topology.conf."""
    return len(_lines_starting(topology_conf, "BlockName"))


def yaml_topologies(topology_yaml: str) -> List[str]:
    """The names of the topologies a topology.yaml defines (``- topology: <name>`` items); [] for ``[]`` or none."""
    found = re.findall(r"^\s*-\s*topology\s*:\s*[\"']?([^\"'\s#]+)", topology_yaml, re.MULTILINE)
    return list(dict.fromkeys(found))


def yaml_has_block(topology_yaml: str) -> bool:
    """A topology.yaml topology of the block type (a ``block:`` key)."""
    return re.search(r"^\s*block\s*:", topology_yaml, re.MULTILINE) is not None


def includes(text: str) -> List[str]:
    """The targets of a config's uncommented ``include`` lines, in order."""
    found = []
    for line in text.splitlines():
        match = INCLUDE.fullmatch(line.split("#", 1)[0])
        if match:
            found.append(match.group(1))
    return found


def loads_pyxis(line: str) -> bool:
    """An uncommented ``required``/``optional`` line whose plug-in is Pyxis's."""
    match = PLUGIN.match(line.split("#", 1)[0])
    return match is not None and posixpath.basename(match.group(2)) == PYXIS_PLUGIN


def loads_plugin(line: str) -> bool:
    """An uncommented ``required``/``optional`` line (any SPANK plug-in)."""
    return PLUGIN.match(line.split("#", 1)[0]) is not None


def include_target(line: str) -> Optional[str]:
    """The target of an uncommented ``include`` line, else None."""
    match = INCLUDE.fullmatch(line.split("#", 1)[0])
    return match.group(1) if match else None


def resolve(target: str, directory: str) -> str:
    """An include's path on the node: absolute as given, else next to the including file (``directory``)."""
    return target if target.startswith("/") else posixpath.join(directory, target)


def has_wildcard(path: str) -> bool:
    return any(c in path for c in "*?[")


def split_version(text: str) -> Optional[Tuple[int, int]]:
    """(major, minor) from ``scontrol --version``'s output (``slurm 25.11.2``, ``slurm-wlm 24.11.5``), or None."""
    match = re.search(r"(\d+)\.(\d+)(?:\.\d+)?", text)
    return (int(match.group(1)), int(match.group(2))) if match else None
