"""A shell command on the Slurm controller through SSM Session Manager, with its exit status.

The same path as ``status --slurm`` (:mod:`hyperpod_cdk.ops.slurm_state`): ``aws ssm start-session`` on the
controller's ``sagemaker-cluster:`` target with the document ``AWS-StartNonInteractiveCommand``. The Session Manager
plugin's own exit status does not say how the command ended (AWS's HyperPod SSM skill notes it can exit non-zero after
the command ran), and the plugin adds lines of its own; so the command prints its exit status on a marked last line,
and what it wrote before that line is its output.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass

from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.ops.access import start_session_argv
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.slurm_state import NON_INTERACTIVE_DOCUMENT

MARK = "### hyperpod-cdk exit "
EXIT_LINE = re.compile(r"^### hyperpod-cdk exit (\d+)\s*$", re.MULTILINE)
BEGIN = "### hyperpod-cdk begin"


@dataclass(frozen=True)
class Answer:
    code: int
    output: str


@dataclass(frozen=True)
class ControllerShell:
    """Runs commands on one node (the controller) of a cluster, each in its own non-interactive session."""

    args: argparse.Namespace
    ctx: OpsContext
    target: str
    timeout: float = 120.0

    def run(self, command: str, timeout: float | None = None) -> Answer:
        """``command`` (sh syntax) on the node; its exit status and output. An OpsError when no exit line came back
        (the session did not start, or the command ran past ``timeout``)."""
        wrapped = f"echo '{BEGIN}'; {command}; echo \"{MARK}$?\""
        parameters = json.dumps({"command": [wrapped]}, separators=(",", ":"))
        argv = start_session_argv(
            self.target, self.args, "--document-name", NON_INTERACTIVE_DOCUMENT, "--parameters", parameters
        )
        answer = self.ctx.capture(argv, timeout or self.timeout)
        found = list(EXIT_LINE.finditer(answer.stdout))
        if not found:
            said = (answer.stderr.strip() or answer.stdout.strip() or "no output").splitlines()[-1]
            raise OpsError(
                f"`aws ssm start-session` to {self.target} exited {answer.code} without running `{command}` to its "
                f"end: {said}",
                Exit.FAILED,
            )
        text = answer.stdout[: found[-1].start()].replace("\r\n", "\n")
        if BEGIN in text:  # the plugin's own lines come before the marker
            text = text.split(BEGIN, 1)[1].lstrip("\n")
        return Answer(int(found[-1].group(1)), text)

    def must(self, command: str, timeout: float | None = None) -> str:
        """``command``'s output; an OpsError naming it when it exits non-zero."""
        answer = self.run(command, timeout)
        if answer.code != 0:
            last = (answer.output.strip() or "no output").splitlines()[-1]
            raise OpsError(f"on the controller, `{command}` exited {answer.code}: {last}", Exit.FAILED)
        return answer.output
