"""Idempotent configuration steps. Each has ``needed(node)`` (reads only) and ``apply(node)``.

A step whose ``needed`` is False after ``apply`` did not converge; the plan reports that as a failure.
"""

from __future__ import annotations

from typing import List

from training_runtime.node import Node


class Step:
    name = "step"

    def needed(self, node: Node) -> bool:
        """Whether :meth:`apply` would change anything. Must not change the node."""
        raise NotImplementedError

    def apply(self, node: Node) -> None:
        raise NotImplementedError

    def describe(self, node: Node) -> List[str]:
        """What :meth:`apply` would do on this node, for ``plan``; one short line per action."""
        return []

    def left_alone(self, node: Node) -> List[str]:
        """What this step found already set up by someone else (HyperPod's AMI) and leaves as it is, with why;
        ``plan`` lists it and ``bootstrap`` logs it. Reads only."""
        return []

    def __repr__(self) -> str:
        return "<step {}>".format(self.name)
