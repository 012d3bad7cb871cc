"""Errors for people: every problem names the field path, the value, what is allowed and the fix."""

from __future__ import annotations

from collections.abc import Sequence


class ConfigurationError(ValueError):
    """Bad input caught before anything is deployed; ``problems`` holds every problem found."""

    def __init__(self, subject: str, problems: Sequence[str]) -> None:
        self.subject = subject
        self.problems = list(problems)
        count = len(self.problems)
        listing = "\n".join(f"  - {problem}{_rule_of(problem)}" for problem in self.problems)
        super().__init__(f"{subject}: {count} problem{'s' if count != 1 else ''}\n{listing}")


def raise_if_any(subject: str, problems: Sequence[str]) -> None:
    if problems:
        raise ConfigurationError(subject, problems)


def _rule_of(problem: str) -> str:
    rule = getattr(problem, "rule", "")
    return f" [{rule}]" if rule else ""
