"""The AWS inventory (``data/aws_inventory/<slug>.yaml``): every constraint sentence of the AWS pages about HyperPod
Slurm clusters, one row each, with the quote and how hyperpod-cdk honours it (a config rule, a cfn-lint rule,
construction, an online preflight check, an update policy, or out of scope with the reason).

One file per AWS page; the file's name is the page's (``sagemaker-hyperpod-scaling-slurm``, ``API_CreateCluster``).
This module loads every file and checks its format, raising :class:`InventoryError` naming the file, the row and
the field. What it cannot know alone (that a rule id exists, that its level fits the row's word, that a row's
``test`` block breaks and passes) is checked by :func:`hyperpod_cdk.aws_data.inventory_checks.cross_problems` and
``tests/test_aws_inventory.py``.
No aws_cdk import (``hyperpod-cdk validate`` reads the update policies from here).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

APPLIES = ("slurm", "eks", "both")
ERROR_WORDS = ("must", "only", "cannot", "not-supported", "required")
WARNING_WORDS = ("avoid", "recommend")
PERMISSION_WORDS = ("can",)
"""AWS allows it (a change UpdateCluster makes in place): nothing refuses it, so such a row is honoured by
construction (or is out of scope), never by a rule; data/update_policies.yaml cites it for an in-place field."""
WORDS = ERROR_WORDS + WARNING_WORDS + PERMISSION_WORDS
ENFORCEMENTS = ("rule", "cfn-lint", "construction", "preflight", "update-policy", "out-of-scope")
POLICY_LEVELS = {
    "immutable": "error",
    "irreversible": "error",
    "new-nodes-only": "warning",
    "replaces-root-volume": "warning",
    "replaces-cluster": "warning",
}
"""The level of an update policy's ``validate --previous`` rule (``rule_previous``): a change the API refuses
(immutable) or cannot undo (irreversible) is an error; one it accepts but that reaches only new nodes, replaces the
root volumes or, through CloudFormation, replaces the cluster is a warning."""
POLICIES = tuple(POLICY_LEVELS)
NO_CFN_LINT = "-"
AWS_DOCS = "https://docs.aws.amazon.com/"
DEFAULT_BASE = "examples/gpu-cluster.yaml"
ID_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)+$")
DATE_PATTERN = re.compile(r"^\d{4}-\d{2}-\d{2}$")

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML has it (several times faster: validate --previous reads every file)."""
PAGE_KEYS = ("page", "title", "read", "partial", "rows")
"""A page's fields; ``partial`` (optional) says why the page was not read end to end, so coverage does not claim it."""
COMMON_KEYS = ("id", "quote", "applies", "word", "enforced_by", "how", "conflicts_with")
KIND_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # enforced_by: (required keys, optional keys) beyond COMMON_KEYS
    "rule": (("rule", "test"), ("cfn_lint", "why_no_cfn_lint")),
    "cfn-lint": (("cfn_lint",), ()),
    "construction": (("how",), ("fact", "cfn_lint", "why_no_cfn_lint")),
    "preflight": (("preflight",), ()),
    "update-policy": (
        ("field", "api_member", "policy", "rule_previous", "test"),
        ("rule", "cfn_lint", "why_no_cfn_lint"),
    ),
    "out-of-scope": (("how",), ()),
}
TEST_KEYS = ("base", "breaks", "passes", "previous", "region")


class InventoryError(ValueError):
    """The inventory's files do not follow the format: each line names the file, the row and the field."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("AWS inventory (src/hyperpod_cdk/data/aws_inventory):\n  " + "\n  ".join(problems))


@dataclass(frozen=True)
class RowTest:
    """How a row's rule is shown to work: ``breaks`` applied to ``base`` fires it, ``passes`` does not; ``previous``
    patches the deployed config for ``validate --previous`` (update policies)."""

    base: str
    breaks: Mapping[str, Any]
    passes: Mapping[str, Any]
    previous: Mapping[str, Any] | None = None
    region: str | None = None


@dataclass(frozen=True)
class Row:
    """One constraint sentence of an AWS page and how hyperpod-cdk honours it."""

    id: str
    page: str
    """The page's slug (its file's name)."""
    url: str
    quote: str
    applies: str
    word: str
    enforced_by: str
    how: str = ""
    rule: str | None = None
    cfn_lint: str | None = None
    why_no_cfn_lint: str = ""
    preflight: str | None = None
    field: str | None = None
    api_member: str | None = None
    policy: str | None = None
    rule_previous: str | None = None
    fact: str | None = None
    conflicts_with: tuple[str, ...] = ()
    test: RowTest | None = None

    @property
    def level(self) -> str:
        """The level the row's word asks of its rule: error for must/only/cannot/not-supported/required, warning
        for avoid/recommend."""
        return "error" if self.word in ERROR_WORDS else "warning"

    @property
    def rule_levels(self) -> frozenset[str]:
        """The levels its rule may have: the word's (or a warning, where AWS's pages disagree); for an update
        policy's ``rule_previous``, the policy's (:data:`POLICY_LEVELS`)."""
        if self.enforced_by == "update-policy":
            return frozenset({POLICY_LEVELS.get(self.policy or "", "")})
        # An EKS page's sentence about a member Slurm clusters also send: unconfirmed on Slurm, so a warning (an
        # error only where a page that covers Slurm says the same; tests/test_aws_inventory.py checks that).
        unsure = self.conflicts_with or self.applies == "eks"
        return frozenset({self.level} | ({"warning"} if unsure else set()))

    @property
    def where(self) -> str:
        return f"{self.page}.yaml row {self.id}"


@dataclass(frozen=True)
class Page:
    """One AWS page, read end to end on ``read``."""

    slug: str
    url: str
    title: str
    read: str
    rows: tuple[Row, ...] = field(default_factory=tuple)
    partial: str = ""
    """Why the page was not read end to end (empty: it was)."""


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _row_problems(where: str, entry: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    kind = entry.get("enforced_by")
    if kind not in ENFORCEMENTS:
        return [
            f"{where}: enforced_by {kind!r} is not one of {', '.join(ENFORCEMENTS)}; name how AWS's words are honoured"
        ]
    required, optional = KIND_KEYS[kind]
    allowed = set(COMMON_KEYS) | set(required) | set(optional)
    for key in sorted(set(entry) - allowed):
        problems.append(
            f"{where}: {key} is not a field of an enforced_by {kind} row (allowed: {', '.join(sorted(allowed))})"
        )
    for key in ("quote", "applies", "word", *required):
        if entry.get(key) in (None, ""):
            problems.append(f"{where}: {key} is missing (enforced_by {kind} needs {', '.join(required) or 'no more'})")
    if not ID_PATTERN.fullmatch(str(entry.get("id", ""))):
        problems.append(
            f"{where}: id {entry.get('id')!r} is not kebab-case starting with a page tag (e.g. scaling-slurm-x)"
        )
    if entry.get("applies") not in APPLIES:
        problems.append(f"{where}: applies {entry.get('applies')!r} is not one of {', '.join(APPLIES)}")
    if entry.get("word") not in WORDS:
        problems.append(f"{where}: word {entry.get('word')!r} is not one of {', '.join(WORDS)}")
    if entry.get("word") in PERMISSION_WORDS and kind not in ("construction", "out-of-scope"):
        problems.append(
            f"{where}: word {entry.get('word')!r} (AWS allows it) is honoured by construction, not by {kind}"
        )
    if kind == "update-policy" and entry.get("policy") not in POLICIES:
        problems.append(f"{where}: policy {entry.get('policy')!r} is not one of {', '.join(POLICIES)}")
    if entry.get("cfn_lint") == NO_CFN_LINT and not _text(entry.get("why_no_cfn_lint")):
        problems.append(f"{where}: cfn_lint '-' needs why_no_cfn_lint: why a template cannot show this")
    conflicts = entry.get("conflicts_with", [])
    if not isinstance(conflicts, list) or not all(isinstance(c, str) for c in conflicts):
        problems.append(f"{where}: conflicts_with {conflicts!r} is not a list of row ids")
    elif conflicts and not _text(entry.get("how")):
        problems.append(f"{where}: conflicts_with needs how: which page we follow and why")
    if "test" in entry:
        problems += _test_problems(where, entry["test"])
    return problems


def _test_problems(where: str, test: Any) -> list[str]:
    if not isinstance(test, dict):
        return [f"{where}: test is not a mapping ({{base, breaks, passes, previous}})"]
    problems = [
        f"{where}: test.{k} is not a test field (allowed: {', '.join(TEST_KEYS)})" for k in set(test) - set(TEST_KEYS)
    ]
    if not isinstance(test.get("breaks"), dict) or not test["breaks"]:
        problems.append(f"{where}: test.breaks must be a non-empty mapping of config paths to values")
    if not isinstance(test.get("passes"), dict):
        problems.append(f"{where}: test.passes must be a mapping of config paths to values ({{}}: the base passes)")
    if test.get("previous") is not None and not isinstance(test["previous"], dict):
        problems.append(f"{where}: test.previous must be a mapping of config paths to values")
    return problems


def _row(slug: str, url: str, entry: dict[str, Any]) -> Row:
    test = entry.get("test")
    return Row(
        id=entry["id"],
        page=slug,
        url=url,
        quote=" ".join(str(entry["quote"]).split()),
        applies=entry["applies"],
        word=entry["word"],
        enforced_by=entry["enforced_by"],
        how=" ".join(str(entry.get("how", "")).split()),
        rule=entry.get("rule"),
        cfn_lint=entry.get("cfn_lint"),
        why_no_cfn_lint=entry.get("why_no_cfn_lint", ""),
        preflight=entry.get("preflight"),
        field=entry.get("field"),
        api_member=entry.get("api_member"),
        policy=entry.get("policy"),
        rule_previous=entry.get("rule_previous"),
        fact=entry.get("fact"),
        conflicts_with=tuple(entry.get("conflicts_with", ())),
        test=None
        if test is None
        else RowTest(
            base=test.get("base", DEFAULT_BASE),
            breaks=test["breaks"],
            passes=test["passes"],
            previous=test.get("previous"),
            region=test.get("region"),
        ),
    )


def load_page(path: Path) -> tuple[Page | None, list[str]]:
    """One file's page, or None with what is wrong (each problem names the file, the row and the field)."""
    name = path.name
    try:
        data = yaml.load(path.read_text(), Loader=_LOADER)
    except yaml.YAMLError as error:
        return None, [f"{name}: not YAML: {error}"]
    if not isinstance(data, dict):
        return None, [f"{name}: expected a mapping with {', '.join(PAGE_KEYS)}"]
    problems = [
        f"{name}: {k} is not a page field (allowed: {', '.join(PAGE_KEYS)})" for k in sorted(set(data) - set(PAGE_KEYS))
    ]
    url, slug = str(data.get("page", "")), path.stem
    if not url.startswith(AWS_DOCS) or url.rsplit("/", 1)[-1].removesuffix(".html") != slug:
        problems.append(
            f"{name}: page {url!r} is not the docs.aws.amazon.com URL of {slug}(.html); name the file after the page"
        )
    if not _text(data.get("title")):
        problems.append(f"{name}: title is missing: the page's title as AWS gives it")
    if not DATE_PATTERN.fullmatch(str(data.get("read", ""))):
        problems.append(f'{name}: read {data.get("read")!r} is not the date the page was read ("YYYY-MM-DD")')
    entries = data.get("rows")
    if not isinstance(entries, list) or not entries:
        return None, [*problems, f"{name}: rows is missing or empty: one row per constraint sentence"]
    rows = []
    for index, entry in enumerate(entries):
        where = f"{name} row {entry.get('id', index) if isinstance(entry, dict) else index}"
        if not isinstance(entry, dict):
            problems.append(f"{where}: expected a mapping")
            continue
        found = _row_problems(where, entry)
        problems += found
        if not found:
            rows.append(_row(slug, url, entry))
    if problems:
        return None, problems
    return Page(slug, url, str(data["title"]), str(data["read"]), tuple(rows), str(data.get("partial", ""))), []


def load_directory(directory: Path) -> tuple[Page, ...]:
    """Every page in ``directory``, checked: InventoryError lists every problem of every file."""
    pages, problems = [], []
    for path in sorted(directory.glob("*.yaml")):
        page, found = load_page(path)
        problems += found
        if page is not None:
            pages.append(page)
    problems += list(inventory_problems(pages))
    if problems:
        raise InventoryError(problems)
    return tuple(pages)


def inventory_problems(pages: Iterable[Page]) -> Iterable[str]:
    """What is wrong across files: a repeated id, a conflicts_with that names an unknown row or is not mutual."""
    seen: dict[str, str] = {}
    rows = [r for p in pages for r in p.rows]
    for row in rows:
        if row.id in seen:
            yield f"{row.where}: id is repeated (first in {seen[row.id]}.yaml); ids are unique across all files"
        seen.setdefault(row.id, row.page)
    by_id = {r.id: r for r in rows}
    for row in rows:
        for other in row.conflicts_with:
            if other not in by_id:
                yield f"{row.where}: conflicts_with names {other!r}, which is no row"
            elif row.id not in by_id[other].conflicts_with:
                yield f"{row.where}: conflicts_with {other!r}, but {other} does not name {row.id}: name each other"


def inventory_directory() -> Path:
    return Path(str(resources.files("hyperpod_cdk").joinpath("data/aws_inventory")))


@cache
def pages() -> tuple[Page, ...]:
    """Every page of the inventory, by slug."""
    return load_directory(inventory_directory())


def rows() -> tuple[Row, ...]:
    """Every row of every page."""
    return tuple(r for p in pages() for r in p.rows)


def row(id: str) -> Row:
    """The row ``id`` (a KeyError names the missing row)."""
    for candidate in rows():
        if candidate.id == id:
            return candidate
    raise KeyError(f"the AWS inventory has no row {id!r}")


__all__ = [
    "ENFORCEMENTS",
    "InventoryError",
    "Page",
    "Row",
    "RowTest",
    "load_directory",
    "pages",
    "row",
    "rows",
]
