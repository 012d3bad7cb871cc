"""One type for a problem with an input, and a registry of small named rules; shared by both halves.

A :class:`Problem` is the text a person reads (``path: got X; what is allowed. Fix: how``) and also
carries its parts (field path, value, what is allowed, fix, rule id, level), so tools can sort, filter,
suppress and document problems without parsing text. It is a ``str`` so every place that prints or joins
problems keeps working.

A :class:`RuleBook` holds small rules, each a function with an id, the section of the input it checks,
what it needs and a one-line docstring that becomes its documentation (``docs/rules.md``). The node
runtime keeps its rules (runtime options, users, instance groups) in books here; ``hyperpod_cdk.rules``
registers them next to the construct-side rules so ``hyperpod-cdk validate`` and synth run all of them.
"""

from __future__ import annotations

import itertools
import reprlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, TypeVar

ERROR = "error"
WARNING = "warning"
INFO = "info"
LEVELS = (ERROR, WARNING, INFO)
"""Error: the input is refused. Warning: accepted, but likely wrong (``validate --strict`` fails on it). Info:
advice or a notice; nothing fails on it."""
LEVEL_LETTERS = {ERROR: "E", WARNING: "W", INFO: "I"}
"""The one mapping between our levels and cfn-lint's rule-id letters (E error, W warning, I informational): the
config rules and the cfn-lint rules of the same support-table row share a level through it."""

_NOTHING = object()

SHOWN_CHARS = 1000
"""The most characters of a value a problem shows (``got ...``): a longer one is cut, so a hostile input (a huge
string, a list of aliases that expands to millions of items) never makes an unbounded message."""
_CUT = reprlib.Repr()
_CUT.maxlevel = 4
_CUT.maxstring = _CUT.maxother = SHOWN_CHARS // 4
_CUT.maxlist = _CUT.maxtuple = _CUT.maxset = _CUT.maxfrozenset = _CUT.maxdict = 10


class Problem(str):
    """A problem with one field: its text, and its parts as attributes."""

    path: str
    got: Any
    expected: str
    fix: str
    rule: str
    level: str
    _got: Any

    def __new__(
        cls,
        path: str,
        expected: str,
        *,
        got: Any = _NOTHING,
        fix: str = "",
        rule: str = "",
        level: str = ERROR,
    ) -> "Problem":
        shown = got if got is _NOTHING or _fits(got, SHOWN_CHARS) else _Shown(_cut(got))
        text = "{}: {}{}{}".format(
            path or "(top level)",
            "" if shown is _NOTHING else "got {!r}; ".format(shown),
            expected,
            ". Fix: " + fix if fix else "",
        )
        self = str.__new__(cls, text)
        self.path = path
        self._got = got
        self.got = None if shown is _NOTHING else shown
        self.expected = expected
        self.fix = fix
        self.rule = rule
        self.level = level
        return self

    @classmethod
    def from_text(cls, text: str, rule: str = "", level: str = ERROR) -> "Problem":
        """A problem from a finished message ``path: [got X; ]expected[. Fix: how]``, split into its parts
        (the value is kept as the text it was shown as)."""
        path, _, rest = text.partition(": ")
        if not rest:
            path, rest = "", text
        rest, _, fix = rest.partition(". Fix: ")
        if rest.startswith("got ") and "; " in rest:
            shown, _, expected = rest[4:].partition("; ")
            return cls(path, expected, got=_Shown(shown), fix=fix, rule=rule, level=level)
        return cls(path, rest, fix=fix, rule=rule, level=level)

    def tagged(self, rule: str, level: Optional[str] = None) -> "Problem":
        """This problem attributed to ``rule`` (kept when it already has one)."""
        if self.rule:
            return self
        return self._copy(rule=rule, level=level or self.level)

    def under(self, old: str, new: str) -> "Problem":
        """This problem with the path prefix ``old`` replaced by ``new`` (e.g. ``runtime`` -> ``runtime_options``)."""
        if not (self.path == old or self.path.startswith(old + ".") or self.path.startswith(old + "[")):
            return self
        return self._copy(path=new + self.path[len(old) :])

    def _copy(self, **changes: Any) -> "Problem":
        parts: Dict[str, Any] = {
            "path": self.path,
            "expected": self.expected,
            "got": self._got,
            "fix": self.fix,
            "rule": self.rule,
            "level": self.level,
        }
        parts.update(changes)
        path, expected = parts.pop("path"), parts.pop("expected")
        return Problem(path, expected, **parts)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "path": self.path,
            "got": self.got,
            "expected": self.expected,
            "fix": self.fix,
            "rule": self.rule,
            "level": self.level,
            "message": str(self),
        }

    def __reduce__(self) -> Any:
        return (_rebuild, (str(self), self.as_dict()))


def _rebuild(text: str, parts: Dict[str, Any]) -> Problem:
    problem = str.__new__(Problem, text)
    for key in ("path", "got", "expected", "fix", "rule", "level"):
        setattr(problem, key, parts[key])
    problem._got = parts["got"] if ": got " in text else _NOTHING
    return problem


_P = TypeVar("_P", bound=str)


def errors(problems: Iterable[_P]) -> List[_P]:
    """The problems that are errors (a plain string counts as an error)."""
    return [p for p in problems if getattr(p, "level", ERROR) == ERROR]


def warnings(problems: Iterable[_P]) -> List[_P]:
    return [p for p in problems if getattr(p, "level", ERROR) == WARNING]


def infos(problems: Iterable[_P]) -> List[_P]:
    """The informational problems: advice, never a failure."""
    return [p for p in problems if getattr(p, "level", ERROR) == INFO]


class _Shown(str):
    """A value known only by how a message showed it: ``repr`` gives the text back unchanged."""

    def __repr__(self) -> str:
        return str(self)


def _fits(value: Any, budget: int) -> bool:
    """Whether ``repr(value)`` is about ``budget`` characters or fewer, found without building it (a shared
    structure, like YAML aliases make, may expand to far more than memory holds): every item visited costs at
    least one, so the walk stops within ``budget`` steps."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, (str, bytes)):
            budget -= len(item) + 3
        elif isinstance(item, bool) or item is None:
            budget -= 5
        elif isinstance(item, int):
            budget -= item.bit_length() // 3 + 2
        elif isinstance(item, float):
            budget -= 24
        elif isinstance(item, dict):
            budget -= 2
            pending.extend(itertools.islice(itertools.chain.from_iterable(item.items()), max(budget, 0) + 1))
        elif isinstance(item, (list, tuple, set, frozenset)):
            budget -= 2
            pending.extend(itertools.islice(item, max(budget, 0) + 1))
        else:
            budget -= len(repr(item))
        if budget < 0:
            return False
    return True


def _cut(value: Any) -> str:
    """``value`` shown in at most about :data:`SHOWN_CHARS` characters, the cut marked."""
    text = _CUT.repr(value)
    if len(text) > SHOWN_CHARS:
        text = text[:SHOWN_CHARS] + "..."
    return text + " (cut)"


Check = Callable[..., Iterable[Problem]]


@dataclass(frozen=True)
class Rule:
    """One named rule. ``doc`` is the first line of the check's docstring."""

    id: str
    section: str
    """The part of the input it checks: cluster, instance_groups, network, storage, lifecycle, runtime, users."""
    field: str
    """The field path it reports, in the config file's terms (``[*]`` for every list item)."""
    check: Check
    needs: Tuple[str, ...] = ()
    """Other sections or facts it reads: e.g. ``hardware`` (the instance table), ``region``."""
    level: str = ERROR
    source: str = ""
    """Where the rule is stated (an AWS document, a Slurm man page, or "hyperpod-cdk" for our own)."""
    suppressible: bool = False
    """Whether a config's ``suppress:`` may silence it: warnings and infos yes; an error only when it is marked
    as our own opinion (an error the AWS API would raise never is)."""

    @property
    def doc(self) -> str:
        text = (self.check.__doc__ or "").strip()
        return text.splitlines()[0].strip() if text else ""


@dataclass
class RuleBook:
    """An ordered registry of rules; ``rule(...)`` is its decorator."""

    name: str
    rules: List[Rule] = field(default_factory=list)

    def rule(
        self,
        id: str,
        section: str,
        field: str,
        needs: Tuple[str, ...] = (),
        level: str = ERROR,
        source: str = "",
        suppressible: Optional[bool] = None,
    ) -> Callable[[Check], Check]:
        """Register a check. ``suppressible`` defaults to ``level != error``: a new error rule cannot be
        suppressed unless it says so (``suppressible=True``: an error that is our own opinion, not the API's)."""
        if level not in LEVELS:
            raise ValueError("level: got {!r}; allowed: {}".format(level, ", ".join(LEVELS)))
        can_suppress = level != ERROR if suppressible is None else suppressible

        def register(check: Check) -> Check:
            if any(r.id == id for r in self.rules):
                raise ValueError("rule id {!r} is registered twice in {}".format(id, self.name))
            if not (check.__doc__ or "").strip():
                raise ValueError("rule {} needs a docstring: its first line is the rule's documentation".format(id))
            self.rules.append(Rule(id, section, field, check, tuple(needs), level, source, can_suppress))
            return check

        return register

    def declare(
        self,
        id: str,
        section: str,
        field: str,
        doc: str,
        run_all: Check,
        level: str = ERROR,
        source: str = "",
    ) -> None:
        """Register a rule that one parsing pass (``run_all``) checks along with others: the rule's check
        is that pass, keeping only the problems tagged with this rule's id."""

        def check(*args: Any) -> List[Problem]:
            return [p for p in run_all(*args) if getattr(p, "rule", "") == id]

        check.__doc__ = doc
        check.__name__ = "check_" + id.lower().replace("-", "_")
        self.rule(id, section, field, level=level, source=source)(check)

    def run(self, *args: Any) -> List[Problem]:
        """Every rule applied to ``args``; each problem tagged with its rule's id and level."""
        found: List[Problem] = []
        for rule in self.rules:
            for problem in rule.check(*args):
                found.append(_as_problem(problem).tagged(rule.id, rule.level))
        return found


def _as_problem(problem: str) -> Problem:
    return problem if isinstance(problem, Problem) else Problem.from_text(problem)
