"""Slurm's side of containers: pyxis registered in ``plugstack.conf`` without wildcards, devices constrained.

* **No wildcard includes.** "Slurm cannot expand wildcard in etc/plugstack.conf while used with configless"
  (AWS's ``slurm_fix_plugstackconf.sh``, awslabs/awsome-distributed-ai
  ``1.architectures/5.sagemaker-hyperpod/LifecycleScripts/base-config/utils``; research note
  ``docs/research/hyperpod-2026-fidelity.md`` §4), and HyperPod's compute and login nodes are configless: an ``include
  <dir>/*`` line becomes one explicit ``include`` per file it matches now, under a comment that names the original.
* **Pyxis registered once.** Where pyxis's plugin is on the node but no uncommented ``plugstack.conf`` line (or
  included file) loads it, ``<conf dir>/plugstack.conf.d/pyxis.conf`` gets ``required <plugin>`` (pyxis's own
  ``pyxis.conf``) and ``plugstack.conf`` one explicit ``include`` of it. A node that already loads it (HyperPod's
  DLAMI registers it with a direct ``required`` line) gets nothing: AWS's sample notes that a second registration
  fails every job launch ("option ... provided by both spank_pyxis.so and spank_pyxis.so").
* **ConstrainDevices=yes** in HyperPod's ``cgroup.conf`` when it sets no ``ConstrainDevices`` (AWS's
  ``install_enroot_pyxis.sh``: "avoid runtime error due to incorrect GPU ID mapping",
  https://github.com/NVIDIA/pyxis/issues/47#issuecomment-842065289). An explicit setting is left as it is.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Callable, Dict, List, Optional

from training_runtime.files import read_text, write_file
from training_runtime.hyperpod_facts import PYXIS_PLUGIN
from training_runtime.node import Node
from training_runtime.steps import Step
from training_runtime.steps.ami import PYXIS_PLUGINS, container_stack

INCLUDE = re.compile(r"^[ \t]*include[ \t]+(\S+)[ \t]*$", re.IGNORECASE)
EXPANDED = "# hyperpod-cdk: `include {}` made explicit (configless Slurm cannot expand wildcards)\n"
PYXIS_CONF = "plugstack.conf.d/pyxis.conf"
CONSTRAIN_DEVICES = "ConstrainDevices=yes"


def has_wildcard(path: str) -> bool:
    return any(c in path for c in "*?[")


def explicit_includes(text: str, expand: Callable[[str], List[str]]) -> str:
    """``text`` with every wildcard ``include`` replaced by the files it matches (``expand``), in order."""
    out: List[str] = []
    for line in text.splitlines(keepends=True):
        found = INCLUDE.fullmatch(line.rstrip("\n"))
        if found and has_wildcard(found.group(1)):
            out.append(EXPANDED.format(found.group(1)))
            out += ["include {}\n".format(path) for path in expand(found.group(1))]
        else:
            out.append(line if line.endswith("\n") else line + "\n")
    return "".join(out)


def with_include(text: str, path: str) -> str:
    """``text`` with an ``include <path>`` line (appended once)."""
    if any((m.group(1) if m else None) == path for m in map(INCLUDE.match, text.splitlines())):
        return text
    prefix = text if not text or text.endswith("\n") else text + "\n"
    return prefix + "include {}\n".format(path)


def with_constrain_devices(text: str) -> str:
    """``text`` with ``ConstrainDevices=yes`` appended, unless an uncommented line sets ConstrainDevices already."""
    if re.search(r"^[ \t]*ConstrainDevices[ \t]*=", text, re.MULTILINE | re.IGNORECASE):
        return text
    prefix = text if not text or text.endswith("\n") else text + "\n"
    return prefix + CONSTRAIN_DEVICES + "\n"


def loads_pyxis(text: Optional[str]) -> bool:
    return any(PYXIS_PLUGIN in line.split("#", 1)[0] for line in (text or "").splitlines())


def _expand(node: Node, directory: str, pattern: str) -> List[str]:
    absolute = pattern if pattern.startswith("/") else "{}/{}".format(directory, pattern)
    matches = glob.glob(str(node.path(absolute)))
    return sorted("/" + os.path.relpath(p, str(node.root)) for p in matches if os.path.isfile(p))


class PyxisPlugstack(Step):
    """This node's ``<conf dir>/plugstack.conf`` without wildcards, and pyxis registered where its plugin is."""

    name = "pyxis-plugstack"

    def wanted(self, node: Node) -> Dict[str, str]:
        """Path -> content for every file that must change (empty: nothing to do)."""
        directory = node.slurm.conf_dir
        plugstack = directory + "/plugstack.conf"
        text = read_text(node, plugstack)
        new = explicit_includes(text, lambda p: _expand(node, directory, p)) if text is not None else None
        files: Dict[str, str] = {}
        stack = container_stack(node)
        if stack.pyxis_plugin and not stack.pyxis_registered:
            include = "{}/{}".format(directory, PYXIS_CONF)
            if not loads_pyxis(read_text(node, include)):
                files[include] = "required {}\n".format(stack.pyxis_plugin)
            new = with_include(new or "", include)
        if new is not None and new != text:
            files[plugstack] = new
        return files

    def needed(self, node: Node) -> bool:
        return bool(self.wanted(node))

    def apply(self, node: Node) -> None:
        for path, content in sorted(self.wanted(node).items(), key=lambda item: item[0].endswith("plugstack.conf")):
            target = node.path(path)  # the included file first, so no moment names a missing file
            write_file(node, path, content, mode=target.stat().st_mode & 0o7777 if target.exists() else 0o644)

    def describe(self, node: Node) -> List[str]:
        lines = []
        for path, content in sorted(self.wanted(node).items()):
            if path.endswith(PYXIS_CONF):
                lines.append("write {} ({})".format(path, content.strip()))
            else:
                before = read_text(node, path) or ""
                globs = [m.group(1) for m in map(INCLUDE.match, before.splitlines()) if m and has_wildcard(m.group(1))]
                what = ["make `include {}` explicit".format(g) for g in globs]
                if PYXIS_CONF not in before and PYXIS_CONF in content:
                    what.append("include {}".format(PYXIS_CONF))
                lines.append("edit {}: {}".format(path, "; ".join(what)))
        return lines

    def left_alone(self, node: Node) -> List[str]:
        stack = container_stack(node)
        if stack.pyxis_registered:
            return ["pyxis: loaded by {} (not registered again)".format(stack.pyxis_registered)]
        if not stack.pyxis_plugin:
            return ["pyxis: no plugin on this node ({}), so not registered".format(" or ".join(PYXIS_PLUGINS))]
        return []


class CgroupDevices(Step):
    """``ConstrainDevices=yes`` in the controller's ``cgroup.conf`` (HyperPod: slurmctld serves it to configless
    nodes). A file that sets ConstrainDevices already, or no cgroup.conf at all, is left as it is (AWS's sample edits
    only an existing file)."""

    name = "cgroup-constrain-devices"

    def _path(self, node: Node) -> str:
        return node.slurm.conf_dir + "/cgroup.conf"

    def needed(self, node: Node) -> bool:
        text = read_text(node, self._path(node))
        return text is not None and with_constrain_devices(text) != text

    def apply(self, node: Node) -> None:
        path = self._path(node)
        text = read_text(node, path) or ""
        mode = node.path(path).stat().st_mode & 0o7777
        write_file(node, path, with_constrain_devices(text), mode=mode)

    def describe(self, node: Node) -> List[str]:
        return ["append {} to {}".format(CONSTRAIN_DEVICES, self._path(node))]

    def left_alone(self, node: Node) -> List[str]:
        text = read_text(node, self._path(node))
        if text is None:
            return ["{}: none on this node, not created".format(self._path(node))]
        if not self.needed(node):
            found = re.search(r"^[ \t]*(ConstrainDevices[ \t]*=.*)$", text, re.MULTILINE | re.IGNORECASE)
            return ["{}: {} kept".format(self._path(node), found.group(1).strip() if found else "")]
        return []
