#!/usr/bin/env python3
"""Apply known breaking changes to a scratch copy of the repository and show that the tests catch each.

Each mutation is one small edit that breaks a behaviour the project relies on (most of them once went
unnoticed by the whole suite). The mutations are data: every ``tests/mutations/*.yaml`` file is a YAML list
of entries (tests/mutations/README.md describes the format)::

    - id: cdk.trainingclusterstack-not-check-config   # <area>.<slug>, unique across the files
      alias: M1                                       # optional: the id it had before (docs, commit messages)
      what: TrainingClusterStack does not check its config
      file: src/hyperpod_cdk/stacks/training_cluster.py
      old: "exact text, found exactly once in the file"
      new: "its replacement"
      tests: [tests/test_stack.py]                    # test files or node ids that must catch it
      compliance: false                               # true: run the tests' slow compliance checks too

For each mutation, this script copies the repository (the files ``git ls-files`` names, tracked or new but
not ignored) to a scratch directory, checks that the named tests pass there unchanged, applies the edit,
runs the same tests again and reports:

* ``caught``: at least one test failed with the edit in place;
* ``SURVIVED``: every test still passed, so nothing guards that behaviour;
* ``MISSING``: the edit's old text is no longer in the file (the code moved: update the mutation).

``--check`` only checks the table (seconds): every entry well formed, ids and aliases unique, each old text
found exactly once in its file, each named test file present. It is a change detector on the code's text, so
it runs with the mutations (``make mutants`` runs ``--check`` first), not in the unit suite.

The exit status is 0 only when every mutation is caught (or, with ``--check``, the table is sound). Run it
from the repository root with the project's virtual environment::

    .venv/bin/python scripts/mutants.py --check       # the table still applies
    .venv/bin/python scripts/mutants.py               # all mutations
    .venv/bin/python scripts/mutants.py cdk.capacity-spot-renders-ondemand M2   # some, by id or alias
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TABLES = Path("tests") / "mutations"
REQUIRED = ("id", "what", "file", "old", "new", "tests")
OPTIONAL = ("alias", "compliance")


class TableError(Exception):
    """A mutation file that is not a list of well-formed entries."""


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    compliance: bool = False
    """Run the tests' slow compliance checks too (cdk-nag, the strict validator, checkov)."""
    alias: str | None = None
    source: str = ""
    """The YAML file it comes from."""

    def known_as(self, name: str) -> bool:
        return name in (self.name, self.alias)


def _entry(raw: Any, where: str) -> Mutation:
    if not isinstance(raw, dict):
        raise TableError(f"{where}: an entry must be a mapping with keys {', '.join(REQUIRED)}")
    missing = [key for key in REQUIRED if key not in raw]
    unknown = sorted(set(raw) - set(REQUIRED) - set(OPTIONAL))
    if missing or unknown:
        raise TableError(f"{where} ({raw.get('id', '?')}): missing keys {missing}, unknown keys {unknown}")
    name = raw["id"]
    if not isinstance(name, str) or "." not in name.strip("."):
        raise TableError(f"{where}: id {name!r} must be '<area>.<slug>', e.g. cdk.stack-unchecked")
    texts = {key: raw[key] for key in ("what", "file", "old", "new")}
    if not all(isinstance(value, str) for value in texts.values()) or not raw["old"]:
        raise TableError(f"{where} ({name}): what, file, old and new must be strings, old not empty")
    tests = raw["tests"]
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise TableError(f"{where} ({name}): tests must be a non-empty list of test files or node ids")
    compliance = raw.get("compliance", False)
    if not isinstance(compliance, bool):
        raise TableError(f"{where} ({name}): compliance must be true or false")
    alias = raw.get("alias")
    if alias is not None and not isinstance(alias, str):
        raise TableError(f"{where} ({name}): alias must be a string")
    return Mutation(name, raw["what"], raw["file"], raw["old"], raw["new"], tuple(tests), compliance, alias, where)


def load(tables: Path) -> tuple[Mutation, ...]:
    """Every entry of every ``*.yaml`` under ``tables``, in file-name order; ids and aliases unique."""
    mutations: list[Mutation] = []
    for path in sorted(tables.glob("*.yaml")):
        try:
            entries = yaml.safe_load(path.read_text()) or []
        except yaml.YAMLError as error:
            raise TableError(f"{path.name}: not YAML: {error}") from None
        if not isinstance(entries, list):
            raise TableError(f"{path.name}: must be a YAML list of mutations")
        mutations.extend(_entry(raw, f"{path.name}[{index}]") for index, raw in enumerate(entries))
    seen: dict[str, str] = {}
    for mutation in mutations:
        for name in filter(None, (mutation.name, mutation.alias)):
            if name in seen:
                raise TableError(f"{mutation.source}: {name!r} is already used by {seen[name]}")
            seen[name] = mutation.source
    return tuple(mutations)


def check(mutations: Iterable[Mutation], root: Path) -> list[str]:
    """What no longer applies: an old text not found exactly once, a named test file that is gone."""
    problems = []
    for mutation in mutations:
        path = root / mutation.file
        count = path.read_text().count(mutation.old) if path.is_file() else 0
        if count != 1:
            where = "not found" if count == 0 else f"found {count} times"
            problems.append(f"{mutation.name}: the old text is {where} in {mutation.file}: update its pattern")
        for test in mutation.tests:
            if not (root / test.split("::")[0]).is_file():
                problems.append(f"{mutation.name}: {test} does not exist")
    return problems


def repository_files(root: Path) -> list[str]:
    """Tracked files and new files that git does not ignore (symbolic links included, to files or folders)."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout
    names = out.decode().split("\0")
    return [name for name in names if name and ((root / name).is_file() or (root / name).is_symlink())]


def copy_repository(root: Path, target: Path) -> None:
    for name in repository_files(root):
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        if (root / name).is_symlink():  # e.g. examples/jobs -> the emulator's packaged jobs: a link, as committed
            destination.symlink_to(os.readlink(root / name))
        else:
            shutil.copy2(root / name, destination)
    for installed in (".venv-scan", "node_modules"):  # checkov's venv and the pinned CDK CLI (make setup)
        if (root / installed).is_dir():
            (target / installed).symlink_to(root / installed)


def tests_pass(copy: Path, tests: tuple[str, ...], compliance: bool = False) -> tuple[bool, str]:
    """Run ``tests`` in ``copy`` with its own sources first on the path; (passed, last lines)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy / "src"), str(copy / "hyperpod-local" / "src"), str(copy / "tests")])
    env.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
        + ([] if compliance else ["-m", "not compliance"])
        + list(tests),
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    return result.returncode == 0, lines[-1] if lines else result.stderr.strip()[-300:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("names", nargs="*", help="mutations to run, by id or alias (default: all)")
    parser.add_argument("--check", action="store_true", help="only check that every mutation still applies")
    args = parser.parse_args(argv)
    try:
        mutations = load(ROOT / TABLES)
    except TableError as error:
        print(f"error: {TABLES}/{error}", file=sys.stderr)
        return 2
    chosen = [m for m in mutations if not args.names or any(m.known_as(name) for name in args.names)]
    unknown = [name for name in args.names if not any(m.known_as(name) for m in mutations)]
    if unknown:
        parser.error(f"unknown mutations {unknown}; known: {', '.join(m.name for m in mutations)}")
    if args.check:
        problems = check(chosen, ROOT)
        for problem in problems:
            print(problem)
        print(f"{len(chosen)} mutations checked, {len(problems)} problem(s)")
        return 1 if problems else 0
    return run(chosen)


def run(chosen: list[Mutation]) -> int:
    failures = 0
    baseline: dict[tuple[str, ...], tuple[bool, str]] = {}
    with tempfile.TemporaryDirectory(prefix="mutants-") as scratch:
        copy = Path(scratch)
        copy_repository(ROOT, copy)
        for mutation in chosen:
            path = copy / mutation.file
            original = path.read_text() if path.exists() else ""
            count = original.count(mutation.old)
            if count != 1:
                failures += 1
                where = "not found" if count == 0 else f"found {count} times"
                print(f"{mutation.name} MISSING   {mutation.what}: the old text is {where} in {mutation.file}")
                continue
            key = (*mutation.tests, str(mutation.compliance))
            if key not in baseline:
                baseline[key] = tests_pass(copy, mutation.tests, mutation.compliance)
            passed, summary = baseline[key]
            if not passed:
                failures += 1
                print(f"{mutation.name} BROKEN    {mutation.what}: the tests fail without the mutation ({summary})")
                continue
            path.write_text(original.replace(mutation.old, mutation.new))
            try:
                passed, summary = tests_pass(copy, mutation.tests, mutation.compliance)
            finally:
                path.write_text(original)
            if passed:
                failures += 1
                print(f"{mutation.name} SURVIVED  {mutation.what}: {' '.join(mutation.tests)} ({summary})")
            else:
                print(f"{mutation.name} caught    {mutation.what}: {summary}")
    print(f"{len(chosen) - failures} of {len(chosen)} mutations caught")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
