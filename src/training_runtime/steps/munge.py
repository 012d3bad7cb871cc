"""munge: one key per cluster, made once by the (primary) controller and handed to every node through shared
storage in a directory only root can read. The key never goes to the bucket, the template or a log."""

from __future__ import annotations

import os
from typing import List

from training_runtime.errors import StepFailed
from training_runtime.files import ensure_dir, file_matches, write_file
from training_runtime.node import Node
from training_runtime.paths import MUNGE_KEY, MUNGED_ARGV, MUNGED_PID_FILE, MUNGED_RUN_DIR
from training_runtime.retry import NotReady
from training_runtime.services import Daemon
from training_runtime.steps import Step
from training_runtime.steps.storage import owner_problem

KEY_SIZE = 1024
NODE_KEY = MUNGE_KEY

MUNGED = Daemon(name="munged", unit="munge", argv=MUNGED_ARGV, pid_file=MUNGED_PID_FILE, run_dir=MUNGED_RUN_DIR)


def shared_key(node: Node) -> str:
    return node.shared_dir + "/secrets/munge.key"


class MungeKey(Step):
    name = "munge-key"

    def _shared(self, node: Node) -> bytes:
        return node.path(shared_key(node)).read_bytes()

    def needed(self, node: Node) -> bool:
        if owner_problem(node):
            return True
        try:
            key = self._shared(node)
        except FileNotFoundError:
            return True
        return not file_matches(node, NODE_KEY, key, mode=0o400, owner="munge", group="munge")

    def apply(self, node: Node) -> None:
        problem = owner_problem(node)  # never adopt another cluster's key (shared-storage refused it first)
        if problem:
            raise StepFailed(problem)
        secrets_dir = node.shared_dir + "/secrets"
        if node.is_primary_controller:  # backup controllers wait for its key like every other node
            ensure_dir(node, secrets_dir, mode=0o700)
            if not node.path(shared_key(node)).exists():
                write_file(node, shared_key(node), os.urandom(KEY_SIZE), mode=0o400)

        def key_ready() -> bytes:
            try:
                return self._shared(node)
            except FileNotFoundError:
                raise NotReady("the controller has not published the munge key yet") from None

        try:
            key = node.retry.call(key_ready, what="munge key on shared storage")
        except NotReady:
            raise StepFailed(
                "no munge key at {} on shared storage; the controller creates it. Fix: check the "
                "controller's bootstrap log".format(shared_key(node))
            ) from None
        ensure_dir(node, "/etc/munge", mode=0o700, owner="munge", group="munge")
        write_file(node, NODE_KEY, key, mode=0o400, owner="munge", group="munge")

    def describe(self, node: Node) -> List[str]:
        actions = []
        if node.is_primary_controller and not node.path(shared_key(node)).exists():
            actions.append("create the cluster's munge key at {} (root only)".format(shared_key(node)))
        actions.append("install the cluster's munge key at {} (munge, 0400)".format(NODE_KEY))
        return actions
