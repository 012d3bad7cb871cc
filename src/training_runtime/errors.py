"""Errors the runtime reports before it changes anything on the node."""

from __future__ import annotations

from typing import Sequence


class InputError(ValueError):
    """An input file is malformed; ``problems`` lists every problem found, each with its field path."""

    subject = "input"

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        lines = "\n".join("  - " + p for p in self.problems)
        super().__init__(
            "{} {} invalid ({} problem{}):\n{}".format(
                self.subject,
                "are" if self.subject.endswith("s") else "is",
                len(self.problems),
                "" if len(self.problems) == 1 else "s",
                lines,
            )
        )


class StepFailed(RuntimeError):
    """A step could not reach its desired state; the message says what and how to fix it."""
