"""Output: JSON for scripts, rich tables for people."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.table import Table

    from hyperpod_cdk.ops.context import OpsContext
    from hyperpod_cdk.ops.lookup import Node


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=_plain)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S %Z").strip() if value else ""


STATUS_STYLE = {
    "InService": "green",
    "Running": "green",
    "Failed": "red",
    "Failure": "red",
    "Degraded": "yellow",
    "RollingBack": "red",
}


def styled(status: str) -> str:
    style = STATUS_STYLE.get(status)
    return f"[{style}]{status}[/{style}]" if style else status


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    from rich.table import Table

    grid = Table(title=title, title_justify="left", header_style="bold")
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*row)
    return grid


def node_table(nodes: Sequence[Node], title: str | None = "Nodes", slurm: Callable[[Node], str] | None = None) -> Table:
    """The node rows; ``slurm`` adds a Slurm column (``status --slurm``)."""
    columns = ["Instance", "Group", "Type", "Status", "Slurm hostname", "Launched", "Message"]
    rows = [
        [n.instance_id, n.group, n.instance_type, styled(n.status), n.hostname, when(n.launch_time), n.message]
        for n in nodes
    ]
    if slurm is not None:
        columns.insert(5, "Slurm")
        for node, row in zip(nodes, rows, strict=True):
            row.insert(5, slurm(node))
    return table(title, columns, rows)


def print_json(ctx: OpsContext, value: Any) -> None:
    ctx.write(to_json(value))
