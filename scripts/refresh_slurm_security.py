#!/usr/bin/env python3
"""Refresh the Slurm security table from SchedMD's CHANGELOG files, where the network allows.

SchedMD's repository keeps one CHANGELOG per Slurm line (``CHANGELOG/slurm-24.11.md``): a ``## Changes in Slurm
24.11.5`` heading per release, and the release's entries under it, a security fix naming its CVE ("Fix security issue
where a coordinator could add a user with elevated privileges. CVE-2025-43904."). For each line the table knows,
and the next two lines (so a new line is found), this script reads that file, takes the first release of the line
whose entries name each CVE, and rewrites ``src/hyperpod_cdk/data/slurm_security.yaml``:

* an advisory's ``fixed`` release of a line is set from the CHANGELOG when every CVE of the advisory names the same
  release there (a line the table says has no fix gets one when SchedMD ships it); when its CVEs now differ, the
  script says so and leaves the row for a person to split;
* a CVE no advisory has becomes a new advisory, unverified: its quote is the CHANGELOG's entry, and its date,
  severity and older lines are left for a person to read from SchedMD's announcement;
* ``checked`` becomes today's date (``--today`` sets it).

Sources, quotes, notes and severities a person wrote are kept. Then ``scripts/gen_slurm_security.py`` rewrites the
runtime's copy and docs/operations.md. Offline (or with SchedMD's address unreachable) it says so in one line and
changes nothing (exit 3)::

    .venv/bin/python scripts/refresh_slurm_security.py [--dry-run] [--today YYYY-MM-DD]
    .venv/bin/python scripts/refresh_slurm_security.py --from ~/src/slurm/CHANGELOG   # a local copy of the files

tests/test_slurm_security_refresh.py runs it on stored CHANGELOG excerpts (tests/fixtures/slurm_changelog/).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
BASE_URL = "https://raw.githubusercontent.com/SchedMD/slurm/master/CHANGELOG/"
PAGE_URL = "https://github.com/SchedMD/slurm/blob/master/CHANGELOG/"
TIMEOUT_S = 20.0
HEADING = re.compile(r"^#+\s*Changes in (?:Slurm\s+)?(\d+\.\d+\.\d+(?:-?(?:rc|pre)\d+)?)\s*$", re.IGNORECASE)
CVE = re.compile(r"CVE-\d{4}-\d{4,}")
HEADER = """\
# Slurm's security releases, as hyperpod-cdk's security gate reads them (docs/operations.md, "Slurm security
# releases"). scripts/gen_slurm_security.py writes src/training_runtime/slurm_security_table.py (what the library and
# the node runtime read) and the generated tables of docs/operations.md from this file; scripts/
# refresh_slurm_security.py rewrites it (the `fixed` releases, new CVEs, `checked`) from SchedMD's CHANGELOG files
# where the network allows, in this format. tests/test_slurm_security.py checks the format, the sources and that
# the copies are current.
#
# An advisory: the CVE ids fixed together on the same releases; `fixed` maps each Slurm release series (line) to its
# first release with the fix; a line newer than every line listed came out with the fix (unaffected); a line older
# than every line listed is `older` (affected, unaffected or unknown: what the sources say); a line between listed
# lines must be listed (null: affected, and no release of that line fixes it). `verified: false` says why a fact is
# not confirmed by a stored source.
"""


class Unreachable(Exception):
    """SchedMD's CHANGELOG could not be read (no network, a proxy, an outage)."""


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_slurm_security", ROOT / "scripts" / "gen_slurm_security.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_slurm_security", module)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
slurm_security = GEN.slurm_security


def release_of(version: str) -> str:
    """A CHANGELOG heading's version as the release that first ships it: ``25.05.0rc1`` -> ``25.05.0``."""
    release = slurm_security.parse(version)
    return f"{release.line}.{release.patch}"


def parse_changelog(text: str, line: str) -> dict[str, tuple[str, str]]:
    """Each CVE the CHANGELOG of ``line`` names -> (the first release of the line that names it, the entry)."""
    found: dict[str, tuple[str, str]] = {}
    current: str | None = None
    for raw in text.splitlines():
        heading = HEADING.match(raw.strip())
        if heading:
            version = heading.group(1)
            current = version if slurm_security.parse(version).line == line else None
            continue
        if current is None:
            continue
        for cve in CVE.findall(raw):
            entry = raw.strip().lstrip("*-+ ").strip()
            known = found.get(cve)
            if known is None or slurm_security.parse(current).key < slurm_security.parse(known[0]).key:
                found[cve] = (release_of(current), entry)
    return found


def next_lines(line: str, count: int = 2) -> list[str]:
    """The lines after ``line`` in SchedMD's cadence (YY.05 and YY.11): ``25.11`` -> ``26.05``, ``26.11``."""
    major, minor = slurm_security.line_key(line)
    found = []
    for _ in range(count):
        major, minor = (major, 11) if minor < 11 else (major + 1, 5)
        found.append(f"{major}.{minor:02d}")
    return found


def lines_to_read(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the lines the table names, the next lines that may exist yet)."""
    known = {line for row in data["advisories"] for line in row["fixed"]}
    known |= {slurm_security.parse(v["version"]).line for v in data["versions"]}
    ordered = sorted(known, key=slurm_security.line_key)
    return ordered, [x for x in next_lines(ordered[-1]) if x not in known]


def fetch_url(url: str) -> str | None:
    """The text at ``url``; None when it does not exist (404); Unreachable when it cannot be read."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            return str(answer.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise Unreachable(f"{url} answered HTTP {error.code}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise Unreachable(f"cannot read {url}: {reason}") from None


def from_directory(directory: Path) -> Callable[[str], str | None]:
    """A fetch that reads ``slurm-<line>.md`` from a local copy of SchedMD's CHANGELOG directory."""

    def fetch(url: str) -> str | None:
        path = directory / url.rsplit("/", 1)[-1]
        return path.read_text() if path.is_file() else None

    return fetch


def read_changelogs(
    data: dict[str, Any], fetch: Callable[[str], str | None], base_url: str = BASE_URL
) -> tuple[dict[str, dict[str, tuple[str, str]]], list[str]]:
    """Each line's CVEs (parse_changelog) and notes; Unreachable when a line the table names cannot be read."""
    known, maybe = lines_to_read(data)
    found: dict[str, dict[str, tuple[str, str]]] = {}
    notes = []
    for line in [*known, *maybe]:
        text = fetch(f"{base_url}slurm-{line}.md")
        if text is None:
            if line in known:
                notes.append(f"{line}: SchedMD has no CHANGELOG/slurm-{line}.md; the table's rows for it are kept")
            continue
        found[line] = parse_changelog(text, line)
    return found, notes


def _new_advisory(cves: list[str], fixes: dict[str, tuple[str, str]], today: str) -> dict[str, Any]:
    newest = max(fixes, key=slurm_security.line_key)
    lines = sorted(fixes, key=slurm_security.line_key)
    return {
        "id": f"new-{cves[0]}",
        "date": None,
        "title": "Slurm " + ", ".join(fixes[x][0] for x in reversed(lines)),
        "cves": cves,
        "fixed": {x: fixes[x][0] for x in lines},
        "older": "unknown",
        "severity": None,
        "url": f"{PAGE_URL}slurm-{newest}.md",
        "sources": [{"source": f"{PAGE_URL}slurm-{x}.md", "quote": fixes[x][1]} for x in lines],
        "verified": False,
        "why": (
            f"Found in SchedMD's CHANGELOG by scripts/refresh_slurm_security.py on {today}: the advisory (its date, "
            "severity, affected older lines) is not read yet"
        ),
    }


def merge(
    data: dict[str, Any], found: dict[str, dict[str, tuple[str, str]]], today: str
) -> tuple[dict[str, Any], list[str]]:
    """The table with the CHANGELOGs' fixes merged in, and what changed (or needs a person), one line each."""
    changes: list[str] = []
    advisories = [dict(row, fixed=dict(row["fixed"])) for row in data["advisories"]]
    known = {cve for row in advisories for cve in row["cves"]}
    for row in advisories:
        for line, cves in found.items():
            named = {cve: cves[cve][0] for cve in row["cves"] if cve in cves}
            if not named:
                continue
            releases = set(named.values())
            if len(releases) > 1 or len(named) < len(row["cves"]):
                missing = sorted(set(row["cves"]) - set(named))
                changes.append(
                    f"advisory {row['id']}: on {line} its CVEs are fixed in {', '.join(sorted(releases))}"
                    + (f" and {', '.join(missing)} is not named" if missing else "")
                    + ": split the advisory by hand"
                )
                continue
            release = releases.pop()
            if row["fixed"].get(line) != release:
                changes.append(f"advisory {row['id']}: {line} fixed in {release} (was {row['fixed'].get(line)})")
                row["fixed"][line] = release
        row["fixed"] = dict(sorted(row["fixed"].items(), key=lambda item: slurm_security.line_key(item[0])))
    new: dict[str, dict[str, tuple[str, str]]] = {}
    for line, cves in found.items():
        for cve, fix in cves.items():
            if cve not in known:
                new.setdefault(cve, {})[line] = fix
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for cve, fixes in sorted(new.items()):
        groups.setdefault(tuple(sorted((x, f[0]) for x, f in fixes.items())), []).append(cve)
    for ids in groups.values():
        row = _new_advisory(ids, new[ids[0]], today)
        changes.append(f"new advisory {row['id']}: {', '.join(ids)} ({row['title']}), unverified: read and source it")
        advisories.insert(0, row)
    if data["checked"] != today:
        changes.append(f"checked: {today} (was {data['checked']})")
    return {**data, "checked": today, "advisories": advisories}, changes


def dump(data: dict[str, Any]) -> str:
    """The table in its one format: the header, then the data as yaml writes it."""
    body = yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True, default_flow_style=False)
    return HEADER + body


def refresh(
    fetch: Callable[[str], str | None],
    today: str,
    *,
    table: Path = GEN.TABLE,
    dry_run: bool = False,
    base_url: str = BASE_URL,
    write_outputs: bool = True,
) -> list[str]:
    """Read, merge, check and write the table (and the generated copies); what changed. Unreachable when a
    CHANGELOG cannot be read; ValueError when the merged table breaks its format (nothing is written then)."""
    data = GEN.load(table.read_text())
    found, notes = read_changelogs(data, fetch, base_url)
    merged, changes = merge(data, found, today)
    text = dump(merged)
    checked = GEN.load(text)  # the format holds before anything is written
    if not dry_run:
        table.write_text(text)
        if write_outputs:
            for path, generated in GEN.outputs(checked).items():
                path.write_text(generated)
    return [f"note: {n}" for n in notes] + changes


def main(argv: list[str] | None = None, fetch: Callable[[str], str | None] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="say what would change; write nothing")
    parser.add_argument("--today", default=None, help="the date to record as checked (default: today, UTC)")
    parser.add_argument("--from", dest="directory", default=None, help="read slurm-<line>.md files from DIR")
    parser.add_argument("--base-url", default=BASE_URL, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    today = args.today or datetime.datetime.now(datetime.UTC).date().isoformat()
    if fetch is None:
        fetch = from_directory(Path(args.directory).expanduser()) if args.directory else fetch_url
    try:
        changes = refresh(fetch, today, dry_run=args.dry_run, base_url=args.base_url)
    except Unreachable as error:
        print(
            f"refresh_slurm_security: {error}. Nothing changed. Run it where {args.base_url} is reachable, give "
            "--from DIR (a copy of SchedMD's CHANGELOG directory), or edit src/hyperpod_cdk/data/slurm_security.yaml "
            "by hand and run scripts/gen_slurm_security.py",
            file=sys.stderr,
        )
        return 3
    except ValueError as error:
        print(
            f"refresh_slurm_security: the refreshed table breaks its format; nothing written: {error}", file=sys.stderr
        )
        return 2
    notes = [c for c in changes if c.startswith("note: ")]
    for line in notes + ([f"would change: {c}" for c in changes if c not in notes] if args.dry_run else []):
        print(line)
    if not args.dry_run:
        for change in [c for c in changes if c not in notes] or ["nothing changed"]:
            print(change)
    return 0


if __name__ == "__main__":
    sys.exit(main())
