#!/usr/bin/env python3
"""Write the field map's two tables in docs/configuration.md from ``src/hyperpod_cdk/data/fields.yaml``: "The field
map" (each field's API member and botocore shape or CloudFormation property, its principle classes, whether
``plan`` reads it back, the AWS inventory rows on it) and "Update policies" (every config field, its policy, the
rule ``validate --previous`` reports a change with, and the AWS source). Between ``<!-- BEGIN GENERATED: field-map
-->`` / ``<!-- BEGIN GENERATED: update-policies -->`` and ``<!-- END GENERATED -->``::

    .venv/bin/python scripts/gen_update_policies_doc.py          # rewrite the table
    .venv/bin/python scripts/gen_update_policies_doc.py --check  # exit 1 if the committed copy is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from docgen import replace_block  # noqa: E402

from hyperpod_cdk.aws_data.fields import fields, shape_of  # noqa: E402
from hyperpod_cdk.aws_data.inventory import rows  # noqa: E402
from hyperpod_cdk.aws_data.update_policy import (  # noqa: E402
    Kind,
    declarations,
    dedicated_rule,
    expand,
    holds_data,
    policy_for,
    update_api_citation,
)

DOC = ROOT / "docs" / "configuration.md"
BEGIN = "<!-- BEGIN GENERATED: update-policies -->"
BEGIN_MAP = "<!-- BEGIN GENERATED: field-map -->"
END = "<!-- END GENERATED -->"
RULE = {
    Kind.IN_PLACE: "-",
    Kind.NEW_NODES_ONLY: "UPD-NEW-NODES-ONLY",
    Kind.REPLACES_ROOT_VOLUMES: "UPD-REPLACES-ROOT-VOLUMES",
    Kind.NEW_INSTANCE_GROUP: "UPD-NEW-INSTANCE-GROUP",
    Kind.REFUSED: "UPD-REFUSED",
    Kind.IRREVERSIBLE: "UPD-IRREVERSIBLE",
    Kind.REPLACES_RESOURCE: "UPD-REPLACES",
}


def _rule(path: str, kind: Kind) -> str:
    own = dedicated_rule(path)
    if own:
        return own
    if kind is Kind.REPLACES_RESOURCE and holds_data(path):
        return "UPD-REPLACES-DATA"
    return RULE[kind]


def _cited(path: str) -> str:
    policy, entry = policy_for(path), declarations()[path]
    if policy.kind is Kind.IN_PLACE and not policy.row:
        return ""
    if policy.row:
        return f"[{policy.row}]({policy.source})"
    if isinstance(entry, dict) and "cfn" in entry:
        return f"[{entry['cfn']}]({policy.source}) (createOnlyProperties)"
    if isinstance(entry, dict) and "update_api" in entry:
        service, shape, member = update_api_citation(entry)
        return f"[{shape}]({policy.source}) has no `{member}` ({service} API model)"
    checked = ", ".join(f"`{slug}`" for slug in entry.get("checked", ()))
    return f"AWS silent: [{entry['silent']}]({policy.source}); pages read that say nothing of it: {checked}"


def render() -> str:
    lines = [
        BEGIN,
        "<!-- Generated from src/hyperpod_cdk/data/fields.yaml by scripts/gen_update_policies_doc.py. -->",
        "",
        "| Field | On a deployed cluster | `validate --previous` | AWS |",
        "|---|---|---|---|",
    ]
    for path in declarations():
        kind = policy_for(path).kind
        lines.append(f"| `{path}` | {kind.value} | `{_rule(path, kind)}` | {_cited(path)} |")
    lines.append(END)
    return "\n".join(lines)


def _rows_on(path: str, rule_fields: dict[str, str]) -> list[str]:
    """The inventory rows that bear on ``path``: update-policy rows naming it, rule rows whose rule's field it is."""
    found = []
    for row in rows():
        if (row.field and path in (p.replace("[*]", "[]") for p in expand(row.field))) or (
            row.rule and rule_fields.get(row.rule, "").replace("[*]", "[]") == path
        ):
            found.append(row.id)
    return found


def render_map() -> str:
    from hyperpod_cdk.preflight import load
    from hyperpod_cdk.rules import REGISTRY

    load()
    rule_fields = {r.id: r.field for r in REGISTRY.rules}
    lines = [
        BEGIN_MAP,
        "<!-- Generated from src/hyperpod_cdk/data/fields.yaml by scripts/gen_update_policies_doc.py. -->",
        "",
        "| Field | API member (botocore shape) or CloudFormation property | classes | `plan` | AWS inventory rows |",
        "|---|---|---|---|---|",
    ]
    for f in fields():
        if not (f.api or f.cfn or f.classes):
            continue
        if f.api:
            where = f"`{f.api}` ({shape_of(f.api) or 'not in the API model table'})"
        else:
            where = f"`{f.cfn}`" if f.cfn else "-"
        classes = ", ".join(f"`{c}`" for c in f.classes) or "-"
        on = ", ".join(f"`{r}`" for r in _rows_on(f.path, rule_fields)) or "-"
        lines.append(f"| `{f.path}` | {where} | {classes} | {'yes' if f.plan else '-'} | {on} |")
    lines.append(END)
    return "\n".join(lines)


def updated(text: str) -> str:
    return replace_block(replace_block(text, BEGIN_MAP, END, render_map()), BEGIN, END, render())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/configuration.md is stale")
    args = parser.parse_args()
    text = DOC.read_text()
    new = updated(text)
    if args.check:
        if new != text:
            print("docs/configuration.md: the update-policy table is stale; run scripts/gen_update_policies_doc.py")
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
