"""Prometheus' text exposition format, and writing it the way node_exporter's textfile collector needs:
atomically (a temporary name not ending in ``.prom``, then a rename), so a scrape never sees half a file."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

Labels = Tuple[Tuple[str, str], ...]


@dataclass
class Family:
    """One metric: its name, type, help and samples (labels -> value)."""

    name: str
    help: str
    type: str = "gauge"
    samples: Dict[Labels, float] = field(default_factory=dict)

    def set(self, value: float, **labels: str) -> None:
        self.samples[tuple(sorted(labels.items()))] = float(value)

    def add(self, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        self.samples[key] = self.samples.get(key, 0.0) + float(value)


def escape(value: str) -> str:
    """A label value as the exposition format quotes it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def render(families: List[Family]) -> str:
    lines: List[str] = []
    for family in families:
        lines.append("# HELP {} {}".format(family.name, family.help.replace("\\", "\\\\").replace("\n", " ")))
        lines.append("# TYPE {} {}".format(family.name, family.type))
        for labels, value in sorted(family.samples.items()):
            text = ",".join('{}="{}"'.format(k, escape(v)) for k, v in labels)
            lines.append("{}{} {}".format(family.name, "{" + text + "}" if text else "", _number(value)))
    return "\n".join(lines) + "\n"


def write_textfile(directory: str, name: str, text: str) -> None:
    """Replace ``directory/name`` with ``text`` atomically, world-readable (node_exporter reads it)."""
    os.makedirs(directory, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix="." + name + ".")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(temporary, os.path.join(directory, name))
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
