#!/usr/bin/env python3
"""Write ``training_runtime.slurm_security_table`` and the tables of docs/operations.md from the Slurm security table.

``src/hyperpod_cdk/data/slurm_security.yaml`` holds Slurm's security advisories (the CVEs, the first fixed release of
each Slurm line, the advisory, its sources with quotes, what is not verified and why) and every Slurm release the
project can deploy or run. The node runtime cannot read YAML (stdlib only, Python 3.8), so this script writes the
table as a module holding its JSON, which the library and the node's metrics collector read through
:mod:`training_runtime.slurm_security`, and writes two tables into docs/operations.md ("Slurm security releases"):
the advisories, and the gate's answer for each deployable release, computed by that same module::

    .venv/bin/python scripts/gen_slurm_security.py          # rewrite both
    .venv/bin/python scripts/gen_slurm_security.py --check  # exit 1 if a committed copy is stale

The table's format is checked first (:func:`problems`): a row without a source and its quote, a line between listed
lines left out, an unverified row without its reason, a table dated before its newest row are refused, all problems
at once. tests/test_slurm_security.py fails while a copy is stale or the format is broken.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # docgen, when a test loads this file by path
import docgen  # noqa: E402

sys.path.insert(0, str(ROOT / "src"))

from training_runtime import slurm_security  # noqa: E402

TABLE = ROOT / "src" / "hyperpod_cdk" / "data" / "slurm_security.yaml"
MODULE = ROOT / "src" / "training_runtime" / "slurm_security_table.py"
DOC = ROOT / "docs" / "operations.md"
FORMAT = 1
BEGIN = "<!-- BEGIN GENERATED: slurm-security -->"
END = "<!-- END GENERATED -->"
WIDTH = 120
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
CVE = re.compile(r"^CVE-\d{4}-\d{4,}$")
LINE = re.compile(r"^\d{2}\.\d{2}$")
KINDS = ("ami", "emulator")
ADVISORY_KEYS = {
    "id": True,
    "date": True,
    "title": True,
    "cves": True,
    "fixed": True,
    "older": True,
    "severity": True,
    "url": True,
    "sources": True,
    "verified": True,
    "note": False,
    "why": False,
}
"""Each advisory's keys; True: required."""
VERSION_KEYS = {"version": True, "kind": True, "where": True, "source": True, "quote": False}
TOP_KEYS = {"format", "checked", "scope", "advisories", "versions"}


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _release(text: Any) -> slurm_security.Release | None:
    try:
        return slurm_security.parse(text) if isinstance(text, str) else None
    except ValueError:
        return None


def advisory_problems(row: dict[str, Any], known_lines: set[str]) -> list[str]:
    """What is wrong with one advisory row."""
    found = [f"{key} is missing" for key, needed in ADVISORY_KEYS.items() if needed and key not in row]
    found += [f"unknown key {key!r}" for key in sorted(set(row) - set(ADVISORY_KEYS))]
    if row.get("date") is None and row.get("verified") is not False:
        found.append("date is the advisory's date (null only in an unverified row, whose why says it is not read)")
    elif row.get("date") is not None and not DATE.match(str(row.get("date"))):
        found.append(f"date {row.get('date')!r} is not a date (YYYY-MM-DD, quoted)")
    cves = row.get("cves")
    if not isinstance(cves, list) or not cves or not all(isinstance(c, str) and CVE.match(c) for c in cves):
        found.append("cves is a list of CVE ids (CVE-YYYY-NNNN)")
    fixed = row.get("fixed")
    if not isinstance(fixed, dict) or not fixed:
        found.append("fixed maps each Slurm line (24.11) to its first fixed release, or null")
    else:
        for line, fix in fixed.items():
            if not isinstance(line, str) or not LINE.match(line):
                found.append(f"fixed: {line!r} is not a Slurm line (YY.MM)")
                continue
            release = _release(fix)
            if fix is not None and (release is None or release.patch is None or release.line != line):
                found.append(f"fixed[{line}]: {fix!r} is not a release of the {line} line (or null)")
        listed = sorted((k for k in fixed if isinstance(k, str) and LINE.match(k)), key=slurm_security.line_key)
        if listed:
            low, high = slurm_security.line_key(listed[0]), slurm_security.line_key(listed[-1])
            between = sorted(
                (x for x in known_lines if low < slurm_security.line_key(x) < high and x not in fixed),
                key=slurm_security.line_key,
            )
            if between:
                found.append(
                    f"fixed leaves out {', '.join(between)}, between the lines it lists: list each (null when no "
                    "release of it fixes the advisory)"
                )
    if row.get("older") not in slurm_security.OLDER:
        found.append(f"older is one of {', '.join(slurm_security.OLDER)}")
    if not (isinstance(row.get("url"), str) and str(row.get("url")).startswith("https://")):
        found.append("url is the advisory's https:// address")
    sources = row.get("sources")
    if not isinstance(sources, list) or not sources:
        found.append("sources lists where each fact was read, with the quote")
    else:
        for index, source in enumerate(sources):
            if not isinstance(source, dict) or not _text(source.get("source")) or not _text(source.get("quote")):
                found.append(f"sources[{index}] has a source and its quote")
    if not isinstance(row.get("verified"), bool):
        found.append("verified is true or false")
    elif not row["verified"] and not _text(row.get("why")):
        found.append("an unverified row says why (why:)")
    if row.get("severity") is not None and not _text(row.get("severity")):
        found.append("severity is a text naming whose rating it is, or null where no source gives one")
    for key in ("id", "title"):
        if not _text(row.get(key)):
            found.append(f"{key} is a text")
    return found


def problems(data: Any) -> list[str]:
    """Every problem with the table, each naming its row: its format, its date against its rows, each advisory and
    each deployable version."""
    if not isinstance(data, dict):
        return ["the table is a mapping with format, checked, scope, advisories and versions"]
    found = [f"unknown key {key!r}" for key in sorted(set(data) - TOP_KEYS)]
    if data.get("format") != FORMAT:
        found.append(f"format is {FORMAT} (this generator's); got {data.get('format')!r}")
    checked = str(data.get("checked", ""))
    if not DATE.match(checked):
        found.append(f"checked {data.get('checked')!r} is not a date (YYYY-MM-DD, quoted)")
    if not _text(data.get("scope")):
        found.append("scope says which advisories the table covers")
    advisories = data.get("advisories")
    if not isinstance(advisories, list) or not advisories:
        return [*found, "advisories is a non-empty list"]
    listed = data.get("versions")
    versions: list[Any] = listed if isinstance(listed, list) else []
    known = {k for a in advisories if isinstance(a, dict) and isinstance(a.get("fixed"), dict) for k in a["fixed"]}
    known |= {r.line for v in versions if isinstance(v, dict) and (r := _release(v.get("version")))}
    known = {k for k in known if isinstance(k, str) and LINE.match(k)}
    ids = []
    for index, row in enumerate(advisories):
        if not isinstance(row, dict):
            found.append(f"advisories[{index}] is a mapping")
            continue
        ids.append(row.get("id"))
        found += [f"advisory {row.get('id') or index}: {p}" for p in advisory_problems(row, known)]
    found += [f"advisory {i}: listed twice" for i in sorted({str(i) for i in ids if ids.count(i) > 1})]
    dates = [str(a.get("date")) for a in advisories if isinstance(a, dict) and DATE.match(str(a.get("date", "")))]
    if dates and DATE.match(checked) and checked < max(dates):
        found.append(f"checked {checked} is older than the newest advisory ({max(dates)}): check the table again")
    cves = [c for a in advisories if isinstance(a, dict) and isinstance(a.get("cves"), list) for c in a["cves"]]
    found += [f"{c} is in two advisories" for c in sorted({c for c in cves if cves.count(c) > 1})]
    if not isinstance(data.get("versions"), list) or not versions:
        found.append("versions lists every Slurm the project can deploy or run")
    for index, row in enumerate(versions):
        if not isinstance(row, dict):
            found.append(f"versions[{index}] is a mapping")
            continue
        name = row.get("version") or index
        found += [f"version {name}: {k} is missing" for k, need in VERSION_KEYS.items() if need and not row.get(k)]
        found += [f"version {name}: unknown key {k!r}" for k in sorted(set(row) - set(VERSION_KEYS))]
        if _release(row.get("version")) is None:
            found.append(f"version {name}: not a Slurm release or line")
        if row.get("kind") not in KINDS:
            found.append(f"version {name}: kind is one of {', '.join(KINDS)}")
    return found


def load(text: str | None = None) -> dict[str, Any]:
    """The table; a ValueError naming every problem."""
    data = yaml.safe_load(TABLE.read_text() if text is None else text)
    found = problems(data)
    if found:
        raise ValueError("data/slurm_security.yaml: " + " | ".join(found))
    return data  # type: ignore[no-any-return]


def render_module(data: dict[str, Any]) -> str:
    payload = {"format": data["format"], "checked": data["checked"], "scope": " ".join(data["scope"].split())}
    payload["advisories"] = data["advisories"]
    payload["versions"] = data["versions"]
    body = json.dumps(payload, indent=1, sort_keys=False, ensure_ascii=True)
    if '"""' in body:
        raise ValueError('the table holds """ (the module\'s string delimiter)')
    return "\n".join(
        [
            '"""Slurm\'s security advisories and the Slurm releases hyperpod-cdk deploys: the security gate\'s table.',
            "",
            *textwrap.wrap(
                "Generated by scripts/gen_slurm_security.py from src/hyperpod_cdk/data/slurm_security.yaml: do not "
                "edit; change the table (or run scripts/refresh_slurm_security.py) and run the script. Read through "
                "training_runtime.slurm_security. Stdlib only, so the node runtime (Python 3.8) reads it too.",
                WIDTH - 4,
                break_on_hyphens=False,
            ),
            '"""',
            "",
            "# ruff: noqa: E501 (the table's JSON keeps each quote on one line)",
            "",
            "import json",
            "",
            '_TABLE = r"""' + body + '"""',
            "",
            "TABLE = json.loads(_TABLE)",
            'FORMAT = TABLE["format"]',
            'CHECKED = TABLE["checked"]',
            '"""The date the table was last checked against its sources (no older than its newest advisory)."""',
            'SCOPE = TABLE["scope"]',
            'ADVISORIES = tuple(TABLE["advisories"])',
            'VERSIONS = tuple(TABLE["versions"])',
            '"""Every Slurm the project can deploy or run (HyperPod\'s AMIs, the local cluster), with where from."""',
            "",
        ]
    )


def cell(text: Any) -> str:
    """``text`` as one Markdown table cell: one line, ``|`` escaped, ``<`` not read as HTML."""
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;")


def _fixed(row: dict[str, Any]) -> str:
    parts = [
        f"{line}: {fix if fix else '**none**'}"
        for line, fix in sorted(row["fixed"].items(), key=lambda i: slurm_security.line_key(i[0]))
    ]
    older = {"affected": "older: affected", "unaffected": "older: unaffected", "unknown": "older: not stated"}
    return "<br>".join([*parts, older[row["older"]]])


def _sources(row: dict[str, Any]) -> str:
    quoted = [f'{cell(s["source"])}: "{cell(s["quote"])}"' for s in row["sources"]]
    extra = [cell(row["note"])] if row.get("note") else []
    return "<br>".join(quoted + extra)


def render_block(data: dict[str, Any]) -> str:
    rows = data["advisories"]
    lines = [
        BEGIN,
        "<!-- Generated from src/hyperpod_cdk/data/slurm_security.yaml by scripts/gen_slurm_security.py: edit the "
        "table (or run scripts/refresh_slurm_security.py), then run it. -->",
        "",
        f"The table, checked {data['checked']}. Scope: {cell(data['scope'])}",
        "",
        "| Advisory | Line: first fixed release | CVEs | Severity | Sources (the quote) | Verified |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        verified = "yes" if row["verified"] else f"**no**: {cell(row['why'])}"
        lines.append(
            f"| [{cell(row['title'])}]({row['url']}) ({row['date'] or 'date not read'}) | {_fixed(row)} | "
            f"{', '.join(row['cves'])} | "
            f"{cell(row['severity'] or 'not given')} | {_sources(row)} | {verified} |"
        )
    lines += [
        "",
        "The gate's answer for every Slurm the project deploys or runs (computed by "
        "`training_runtime.slurm_security.verdict`, the code `validate`, `plan`, `status --slurm` and the node "
        "metric run):",
        "",
        "| Slurm | Where | Affected | CVEs | What fixes it |",
        "|---|---|---|---|---|",
    ]
    for version in data["versions"]:
        answer = slurm_security.verdict(version["version"], rows)
        some = f" (releases before {answer.line_fix})" if answer.release.patch is None and answer.line_fix else ""
        affected = f"**yes**{some}" if answer.affected else "no"
        unknown = f"; not stated for this line: {', '.join(answer.unknown_cves)}" if answer.unknown_cves else ""
        lines.append(
            f"| {version['version']} | {cell(version['where'])} | {affected} | "
            f"{', '.join(answer.cves) or '-'}{unknown} | {cell(answer.fixed_by())} |"
        )
    lines.append(END)
    return "\n".join(lines)


def updated(doc: str, data: dict[str, Any]) -> str:
    """docs/operations.md with the block between the markers replaced; a ValueError when the markers are missing."""
    start, end = doc.find(BEGIN), doc.find(END, doc.find(BEGIN))
    if start < 0 or end < 0:
        raise ValueError(f"{DOC.name} has no {BEGIN} ... {END} block")
    return doc[:start] + render_block(data) + doc[end + len(END) :]


def outputs(data: dict[str, Any] | None = None) -> dict[Path, str]:
    """Each generated file and its text."""
    data = load() if data is None else data
    return {MODULE: render_module(data), DOC: updated(DOC.read_text(), data)}


def main(argv: list[str] | None = None) -> int:
    return docgen.main_many(outputs, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
