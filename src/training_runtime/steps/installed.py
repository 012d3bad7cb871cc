"""The runtime as installed on the node: a copy of this package, the node facts, the launch wrapper.

The lifecycle prefix the bootstrap runs from is HyperPod's download directory, which need not outlive
the boot; what runs later (the launcher, Slurm's health check and prolog) uses the copy under
:data:`~training_runtime.paths.INSTALL_DIR` instead. The copy is node-local on purpose: a health check
must still run when the shared file system is what broke.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Dict, List

from training_runtime.facts import NodeFacts, facts_from
from training_runtime.files import read_text, write_file
from training_runtime.hardware import NodeHardware, hardware_for
from training_runtime.node import Node
from training_runtime.paths import BIN_DIR, FACTS_PATH, INSTALL_DIR
from training_runtime.steps import Step

PACKAGE_SOURCE = Path(__file__).resolve().parent.parent
PACKAGE_NAME = PACKAGE_SOURCE.name
LAUNCH_WRAPPER = "/usr/local/bin/hyperpod-launch"


def package_files(source: Path = PACKAGE_SOURCE) -> Dict[str, bytes]:
    """Relative path -> content of every file of the package (no byte-code caches)."""
    files = {}
    for path in sorted(source.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[path.relative_to(source).as_posix()] = path.read_bytes()
    return files


def digest(files: Dict[str, bytes]) -> str:
    hashed = hashlib.sha256()
    for name in sorted(files):
        hashed.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return hashed.hexdigest()


def program(arguments: str, module: str = PACKAGE_NAME) -> str:
    """A wrapper that runs ``python3 -m <module> <arguments>`` from the installed copy of the runtime."""
    return '#!/bin/sh\n# Installed by hyperpod-cdk.\nPYTHONPATH={} exec python3 -m {} {} "$@"\n'.format(
        INSTALL_DIR, module, arguments
    )


def node_facts(node: Node) -> NodeFacts:
    group = node.group
    hardware = hardware_for(node.instance_type, node.options.node_hardware, group.threads_per_core) or NodeHardware(
        cpus=0, sockets=1, cores_per_socket=0, threads_per_core=1, memory_mib=0
    )
    return facts_from(
        hardware,
        cluster=node.params.cluster_name,
        instance_name=node.instance.name,
        instance_type=node.instance_type,
        group=node.group.name,
        role=node.role,
        platform=node.platform,
        shared_mount=node.params.fsx_mount_path if node.has_shared_storage else None,
        emulated_hardware=node.params.emulated_hardware,
        slurm_name=node.slurm_name,
    )


class InstalledRuntime(Step):
    """Copies the package to the node, writes the node facts and the ``hyperpod-launch`` wrapper."""

    name = "installed-runtime"
    STAMP = INSTALL_DIR + "/.digest"

    def wanted(self, node: Node) -> Dict[str, str]:
        return {FACTS_PATH: node_facts(node).dumps(), LAUNCH_WRAPPER: program("launch")}

    def needed(self, node: Node) -> bool:
        if read_text(node, self.STAMP) != digest(package_files()):
            return True
        return any(read_text(node, path) != content for path, content in self.wanted(node).items())

    def apply(self, node: Node) -> None:
        files = package_files()
        if read_text(node, self.STAMP) != digest(files):
            for relative, data in files.items():
                write_file(node, "{}/{}/{}".format(INSTALL_DIR, PACKAGE_NAME, relative), data)
            write_file(node, self.STAMP, digest(files))
        for path, text in self.wanted(node).items():
            write_file(node, path, text, mode=0o755 if path == LAUNCH_WRAPPER else 0o644)

    def describe(self, node: Node) -> List[str]:
        return [
            "install the runtime in {}/{}".format(INSTALL_DIR, PACKAGE_NAME),
            "write {} and {}".format(FACTS_PATH, LAUNCH_WRAPPER),
            "programs Slurm runs go in " + BIN_DIR,
        ]
