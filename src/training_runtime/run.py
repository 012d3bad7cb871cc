"""The one way the runtime runs a command: an argument list (never a shell), a timeout, output captured
and logged when the command fails.

Steps never call :mod:`subprocess` themselves; they call ``node.run(...)``, which reaches a
:class:`Runner`. Tests swap in a runner that records the commands instead of running them.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence

from training_runtime.log import log

DEFAULT_TIMEOUT_S = 300.0
OUTPUT_TAIL = 2000
"""Characters of a failed command's output kept in the log line."""


@dataclass(frozen=True)
class Result:
    argv: List[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class CommandError(RuntimeError):
    """A command exited non-zero or ran past its timeout."""

    def __init__(self, argv: Sequence[str], returncode: Optional[int], output: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.output = output
        status = "timed out" if returncode is None else "exited {}".format(returncode)
        super().__init__("{} {}: {}".format(" ".join(self.argv), status, output.strip()[-OUTPUT_TAIL:]))


class Runner:
    """Runs commands for real."""

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        check: bool = True,
        env: Optional[Mapping[str, str]] = None,
        input: Optional[str] = None,
        secret_output: bool = False,
    ) -> Result:
        """Run ``argv``; raise :class:`CommandError` on failure when ``check``.

        ``secret_output`` keeps stdout out of logs and errors (e.g. a password read from a secret store).
        ``env`` entries are added to the runtime's own environment.
        """
        full_env: Optional[Dict[str, str]] = None
        if env:
            full_env = dict(os.environ)
            full_env.update(env)
        try:
            completed = subprocess.run(
                list(argv),
                input=input,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=full_env,
                check=False,
            )
        except subprocess.TimeoutExpired as expired:
            output = _text(expired.stderr) if secret_output else _text(expired.stdout) + _text(expired.stderr)
            log("command_failed", argv=list(argv), timeout_s=timeout, output=output[-OUTPUT_TAIL:])
            raise CommandError(argv, None, output) from None
        except OSError as error:
            log("command_failed", argv=list(argv), error=str(error))
            raise CommandError(argv, 127, str(error)) from None
        result = Result(list(argv), completed.returncode, completed.stdout, completed.stderr)
        if not result.ok:
            output = result.stderr if secret_output else result.stdout + result.stderr
            log("command_failed", argv=list(argv), returncode=result.returncode, output=output[-OUTPUT_TAIL:])
            if check:
                raise CommandError(argv, result.returncode, output)
        return result


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else ""
