"""What an operator command needs from the outside world, injected so tests replace each part."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hyperpod_cdk.aws.session import make_session

if TYPE_CHECKING:
    import boto3
    from rich.console import Console


def run_process(argv: Sequence[str]) -> int:
    """Runs a command in the foreground (the terminal stays the user's); returns its exit status."""
    from hyperpod_cdk.aws.errors import Exit, OpsError

    try:
        return subprocess.call(list(argv))
    except FileNotFoundError:
        raise OpsError(
            f"{argv[0]} is not on PATH: install the AWS CLI v2 and the Session Manager plugin "
            "(https://docs.aws.amazon.com/systems-manager/latest/userguide/session-manager-working-with-install-plugin.html)",
            Exit.NOT_FOUND,
        ) from None


@dataclass(frozen=True)
class Captured:
    """A finished command: its exit status and what it wrote."""

    code: int
    stdout: str
    stderr: str


def capture_process(argv: Sequence[str], timeout: float) -> Captured:
    """Runs a command with no terminal and collects its output; never raises for a missing program (127) or a
    timeout (124): the caller reports why it has no answer."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return Captured(127, "", f"{argv[0]} is not on PATH: install the AWS CLI v2 and the Session Manager plugin")
    except subprocess.TimeoutExpired:
        return Captured(124, "", f"no answer in {timeout:.0f} s")
    return Captured(done.returncode, done.stdout, done.stderr)


def ask(question: str) -> bool:
    """A yes/no question on the terminal; anything but y/yes (or no terminal) is no."""
    if not sys.stdin.isatty():
        return False
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


@dataclass
class OpsContext:
    """The session, the process runner, the clock, the terminal and the home directory of one command.

    :param session_factory: makes the boto3 Session; receives ``--profile`` and ``--region`` (None: the
        standard AWS_PROFILE / AWS_REGION / config-file chain). Default: ``make_session``.
    :param execute: runs ``aws ssm start-session ...`` and returns its exit status. Default: ``run_process``.
    :param capture: runs a non-interactive ``aws ssm start-session ...`` with a timeout and returns its output
        (``status --slurm``). Default: ``capture_process``.
    :param confirm: asks before reboot/replace. Default: ``ask`` (no terminal means no).
    """

    session_factory: Callable[[str | None, str | None], boto3.session.Session] | None = None
    execute: Callable[[Sequence[str]], int] = run_process
    capture: Callable[[Sequence[str], float], Captured] = capture_process
    confirm: Callable[[str], bool] = ask
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    now: Callable[[], float] = time.time
    home: Path = field(default_factory=Path.home)
    stdout: TextIO | None = None
    stderr: TextIO | None = None
    _consoles: dict[str, Any] = field(default_factory=dict, repr=False)

    def session(self, profile: str | None, region: str | None) -> boto3.session.Session:
        if self.session_factory is not None:
            return self.session_factory(profile, region)
        return make_session(profile, region)

    @property
    def out(self) -> Console:
        """rich Console on stdout (plain text when stdout is not a terminal)."""
        return self._console("out", self.stdout or sys.stdout)

    @property
    def err(self) -> Console:
        return self._console("err", self.stderr or sys.stderr)

    def _console(self, key: str, stream: TextIO) -> Console:
        if key not in self._consoles:
            from rich.console import Console

            # A pipe or file gets full rows (COLUMNS, else 200 characters) rather than rich's 80.
            width = None if stream.isatty() else int(os.environ.get("COLUMNS") or 200)
            self._consoles[key] = Console(file=stream, highlight=False, width=width)
        console: Console = self._consoles[key]
        return console

    def write(self, text: str) -> None:
        """Plain text on stdout (JSON, snippets): no markup, no wrapping."""
        stream = self.stdout or sys.stdout
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()
