"""Node basics on the generic platform: cluster names in /etc/hosts and the distro packages."""

from __future__ import annotations

from typing import List, Set, Tuple

from training_runtime.apt import apt_install, installed
from training_runtime.errors import StepFailed
from training_runtime.files import BEGIN, END, read_text, with_block, write_file
from training_runtime.node import Node
from training_runtime.steps import Step


class ClusterHosts(Step):
    """Every instance's name resolves to its address (torchrun rendezvous and Slurm use the names), once: a
    name that the file already maps to that address outside our block is not added again (with Debian's
    ``multi on`` a second line makes ``hostname --ip-address`` print the address twice)."""

    name = "hosts"

    def _wanted(self, node: Node) -> str:
        current = read_text(node, "/etc/hosts") or "127.0.0.1 localhost\n"
        present = _mapped_outside_block(current, "cluster")
        lines = [
            "{} {}".format(i.address, i.name)
            for i in node.resources.all_instances()
            if (i.name, i.address) not in present
        ]
        return with_block(current, "cluster", "\n".join(lines))

    def needed(self, node: Node) -> bool:
        return read_text(node, "/etc/hosts") != self._wanted(node)

    def apply(self, node: Node) -> None:
        write_file(node, "/etc/hosts", self._wanted(node), mode=0o644)

    def describe(self, node: Node) -> List[str]:
        return ["add {} cluster names to /etc/hosts".format(len(node.resources.all_instances()))]


def _mapped_outside_block(text: str, block: str) -> Set[Tuple[str, str]]:
    """(name, address) pairs of ``text``'s lines outside our managed ``block``."""
    begin, end = BEGIN.format(block), END.format(block)
    pairs: Set[Tuple[str, str]] = set()
    inside = False
    for line in text.splitlines():
        if line.strip() in (begin, end):
            inside = line.strip() == begin
            continue
        fields = line.split("#", 1)[0].split()
        if not inside and len(fields) > 1:
            pairs.update((name, fields[0]) for name in fields[1:])
    return pairs


class Packages(Step):
    """Distro packages this node's role needs, installed only when missing (no upgrades at boot)."""

    def __init__(self, packages: List[str], purpose: str) -> None:
        self.packages = list(packages)
        self.name = "packages:" + purpose

    def missing(self, node: Node) -> List[str]:
        return [p for p in self.packages if not installed(node, p)]

    def needed(self, node: Node) -> bool:
        return bool(self.missing(node))

    def apply(self, node: Node) -> None:
        missing = self.missing(node)
        if node.which("apt-get") is None:
            raise StepFailed(
                "packages {} are missing and this node has no apt-get; the generic platform supports Debian "
                "and Ubuntu. Fix: use a Debian or Ubuntu image, or preinstall the packages".format(", ".join(missing))
            )
        apt_install(node, missing)

    def describe(self, node: Node) -> List[str]:
        return ["apt-get install " + " ".join(self.missing(node))]
