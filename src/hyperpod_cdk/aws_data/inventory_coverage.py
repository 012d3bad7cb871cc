"""The AWS inventory's coverage as docs/rules.md shows it: rows per kind of enforcement, per page, the update
policies, the pages that disagree, and every out-of-scope row with its reason (generated from
``data/aws_inventory``; ``python -m hyperpod_cdk.rules`` writes it with the rest of the reference)."""

from __future__ import annotations

from collections import Counter
from importlib import resources
from typing import Any

import yaml

from hyperpod_cdk.aws_data.inventory import ENFORCEMENTS, Page, Row, pages

HEADER = """
## AWS inventory coverage

Every sentence of the AWS pages below that puts a constraint on a Slurm cluster, an instance group or a setting
(*must, only, cannot, not supported, required, avoid, strongly recommend* and their close variants) is a row of
`src/hyperpod_cdk/data/aws_inventory/<page>.yaml`, with its quote and how hyperpod-cdk honours it: a config rule
(`rule`: an error, or a warning for *avoid* / *recommend*), a cfn-lint rule (`cfn-lint`), correct by construction
(`construction`: the construct always emits a compliant template), an online check (`preflight`), a field that
cannot change once deployed (`update-policy`: `validate --previous` refuses the change), or out of scope with the
reason (listed below). A sentence from an EKS page about a member Slurm clusters also send warns (its Slurm support
is unconfirmed) unless a page that covers Slurm says the same; AWS's permissions (*you can*) are rows too, honoured by
construction, which the in-place update policies cite. tests/test_aws_inventory.py proves each row enforced by a rule
or an update policy: a config that breaks it is refused, one that does not passes.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _counts(rows: tuple[Row, ...]) -> Counter[str]:
    return Counter(r.enforced_by for r in rows)


def _page_link(page: Page) -> str:
    return f"[{_cell(page.title)}]({page.url})"


def coverage_reference() -> str:
    """The coverage section of docs/rules.md."""
    listed = pages()
    every = tuple(r for p in listed for r in p.rows)
    total = _counts(every)
    lines = [HEADER, "| enforcement | rows |", "|---|---|"]
    lines += [f"| `{kind}` | {total[kind]} |" for kind in ENFORCEMENTS]
    lines.append(f"| all | {len(every)} |")
    lines += [
        "",
        "| page | read | " + " | ".join(ENFORCEMENTS) + " | rows |",
        "|---|---|" + "---|" * (len(ENFORCEMENTS) + 1),
    ]
    for page in listed:
        counts = _counts(page.rows)
        read = f"{page.read} (partial: {_cell(page.partial)})" if page.partial else page.read
        cells = [_page_link(page), read, *(str(counts[k] or "") for k in ENFORCEMENTS), str(len(page.rows))]
        lines.append("| " + " | ".join(cells) + " |")
    lines += _unread()
    lines += _update_policies(every) + _conflicts(every) + _support_links() + _out_of_scope(every)
    return "\n".join(lines) + "\n"


def unread_pages() -> list[dict[str, Any]]:
    """``data/aws_pages_unread.yaml``: the pages no copy of which could be read, with what was tried."""
    text = resources.files("hyperpod_cdk").joinpath("data/aws_pages_unread.yaml").read_text()
    found: list[dict[str, Any]] = yaml.safe_load(text)
    return found


def _unread() -> list[str]:
    lines = ["", "### Pages not read", "", "No copy of these could be read, so they have no rows yet.", ""]
    lines += ["| page | searched | tried | meanwhile |", "|---|---|---|---|"]
    for page in unread_pages():
        cells = [page["page"], page["searched"], page["tried"], page["meanwhile"]]
        lines.append("| " + " | ".join(_cell(str(c)) for c in cells) + " |")
    return lines


def _update_policies(rows: tuple[Row, ...]) -> list[str]:
    listed = [r for r in rows if r.enforced_by == "update-policy"]
    if not listed:
        return []
    lines = [
        "",
        "### Fields that cannot change once deployed",
        "",
        "`validate --previous FILE` compares with the deployed config and reports each change below with the quote: "
        "an error where AWS refuses it (immutable, irreversible), a warning where it takes it but only for new "
        "nodes, by replacing the root volumes, or (CloudFormation) by replacing the cluster.",
        "",
        "| field | API member | policy | rule | AWS |",
        "|---|---|---|---|---|",
    ]
    for row in listed:
        cells = (f"`{row.field}`", f"`{row.api_member}`", row.policy, f"`{row.rule_previous}`", _quoted(row))
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines


def _conflicts(rows: tuple[Row, ...]) -> list[str]:
    listed = [r for r in rows if r.conflicts_with]
    if not listed:
        return []
    lines = [
        "",
        "### Where AWS's pages disagree",
        "",
        "| row | disagrees with | AWS | what we do |",
        "|---|---|---|---|",
    ]
    for row in listed:
        others = ", ".join(f"`{o}`" for o in row.conflicts_with)
        lines.append(f"| `{row.id}` | {others} | {_quoted(row)} | {_cell(row.how)} |")
    return lines


def _support_links() -> list[str]:
    from hyperpod_cdk.aws_data.api_support import support_table

    lines = [
        "",
        "### The support table's sources",
        "",
        "Each row of the HyperPod API support table (above) cites the inventory rows whose quotes it rests on; "
        "_none yet_ marks a row whose page's inventory is not written yet.",
        "",
        "| support row | inventory rows |",
        "|---|---|",
    ]
    for row in support_table():
        cited = ", ".join(f"`{i}`" for i in row.aws) or "_none yet_"
        lines.append(f"| `{row.id}` | {cited} |")
    return lines


def _out_of_scope(rows: tuple[Row, ...]) -> list[str]:
    listed = [r for r in rows if r.enforced_by == "out-of-scope"]
    if not listed:
        return []
    lines = ["", "### Out of scope", "", "| row | AWS | why |", "|---|---|---|"]
    lines += [f"| `{r.id}` | {_quoted(r)} | {_cell(r.how)} |" for r in listed]
    return lines


def _quoted(row: Row) -> str:
    return f'"{_cell(row.quote)}" ([{row.page}]({row.url}))'
