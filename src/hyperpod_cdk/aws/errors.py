"""Exit statuses of the operator commands and the one-line errors they print."""

from __future__ import annotations

import enum


class Exit(enum.IntEnum):
    """Every operator command ends with one of these (docs/operations.md lists them)."""

    OK = 0
    FAILED = 1  # the outcome is a failure: cluster Failed, a node failed in a batch, a group Degraded
    USAGE = 2  # bad arguments (argparse uses 2 too)
    NOT_FOUND = 3  # no such cluster, node, stack or log group
    ACCESS = 4  # no credentials, expired credentials, access denied
    UNSUPPORTED = 5  # not Slurm-orchestrated, events without Continuous provisioning, scale refused
    PENDING = 6  # still in progress: `wait` timed out, `status` of a cluster that is changing
    DECLINED = 7  # the confirmation was answered no; nothing was changed
    INTERRUPTED = 130  # Ctrl-C


class OpsError(Exception):
    """A problem the user can act on: one line, and the exit status that tells which kind it is."""

    def __init__(self, message: str, code: Exit) -> None:
        super().__init__(message)
        self.code = code
