#!/usr/bin/env python3
"""Write docs/constructs.md, the construct reference, from the constructs' own docstrings and signatures.

Each construct, stack and value object the library exports documents its props once, as ``:param name:``
lines in its class docstring; the type and the default come from its signature. This script renders one
section per class (the docstring's prose, a props table, the public attributes and methods) and flags, as
awslint does for aws-cdk, every optional prop whose description does not say ``Default:``::

    .venv/bin/python scripts/gen_construct_reference.py          # rewrite docs/constructs.md
    .venv/bin/python scripts/gen_construct_reference.py --check  # exit 1 if the committed copy is stale

It imports the constructs (and so aws_cdk and Node.js through jsii).
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))  # docgen, when a test loads this file by path
sys.path.insert(0, str(ROOT / "src"))

import docgen  # noqa: E402

from hyperpod_cdk.core.docstrings import field_docstrings  # noqa: E402
from hyperpod_cdk.core.node_banner import silence_node_end_of_life_banner  # noqa: E402

silence_node_end_of_life_banner()  # a command of ours: it imports the constructs (aws_cdk, jsii)

DOC = ROOT / "docs" / "constructs.md"

CLASSES: tuple[tuple[str, str], ...] = (
    ("hyperpod_cdk.stacks", "TrainingClusterStack"),
    ("hyperpod_cdk.stacks", "PublishedTrainingClusterStack"),
    ("hyperpod_cdk.stacks", "TrainingCluster"),
    ("hyperpod_cdk.constructs", "ClusterNetwork"),
    ("hyperpod_cdk.constructs", "LustreStorage"),
    ("hyperpod_cdk.constructs", "S3DataRepository"),
    ("hyperpod_cdk.constructs", "ImportedLustreFileSystem"),
    ("hyperpod_cdk.constructs", "OpenZfsStorage"),
    ("hyperpod_cdk.constructs", "ImportedOpenZfsFileSystem"),
    ("hyperpod_cdk.constructs", "LifecycleScripts"),
    ("hyperpod_cdk.constructs", "PublishedLifecycleScripts"),
    ("hyperpod_cdk.constructs", "HyperPodCluster"),
    ("hyperpod_cdk.constructs", "ClusterBase"),
    ("hyperpod_cdk.constructs", "NodeExecutionRole"),
    ("hyperpod_cdk.constructs", "InstanceGroup"),
    ("hyperpod_cdk.model", "ScheduledUpdate"),
    ("hyperpod_cdk.model", "AutoPatch"),
    ("hyperpod_cdk.model", "RollingDeployment"),
    ("hyperpod_cdk.model", "BatchSize"),
    ("hyperpod_cdk.model", "OverrideVpc"),
    ("hyperpod_cdk.model", "Scaling"),
    ("hyperpod_cdk.constructs", "ClusterObservability"),
    ("hyperpod_cdk.constructs", "SlurmRestApi"),
)
"""The documented classes, in the order the reference shows them (compositions first, then the parts)."""

ENUMS_MODULE = "hyperpod_cdk.model"
"""Where the enumerations the props take are defined: the reference lists every one of them."""

SKIPPED_PARAMETERS = frozenset({"self", "scope", "id"})
"""Every construct's first two arguments (CDK's convention), not props."""

PARAM = re.compile(r"^:param (\w+):\s*(.*)$")
DEFAULT = re.compile(r"\bDefault:", re.IGNORECASE)


@dataclass(frozen=True)
class Prop:
    name: str
    type: str
    default: str
    """The signature's default, rendered; ``required`` when there is none."""
    description: str
    """The ``:param`` text; empty when the docstring has none."""

    @property
    def optional(self) -> bool:
        return self.default not in ("required", "")

    @property
    def lacks_default(self) -> bool:
        """An optional prop whose description does not say what it defaults to (awslint's ``props-default-doc``)."""
        return self.optional and not DEFAULT.search(self.description)


def split_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The prose before the first ``:param`` and ``{name: description}`` of every ``:param`` (lines joined)."""
    prose: list[str] = []
    params: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in inspect.cleandoc(doc).splitlines():
        match = PARAM.match(line)
        if match:
            current = params.setdefault(match.group(1), [])
            current.append(match.group(2))
        elif current is not None and line.startswith((" ", "\t")):
            current.append(line.strip())
        elif current is not None and not line.strip():
            current = None
        elif current is None and not params:
            prose.append(line)
        else:
            current = None
    return "\n".join(prose).strip(), {name: " ".join(words).strip() for name, words in params.items()}


def render_value(value: Any) -> str:
    """A default as a reader would write it: enums by member name, containers by their items, never an address."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, tuple | list):
        items = ", ".join(render_value(item) for item in value)
        return f"({items})" if isinstance(value, tuple) else f"[{items}]"
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    text = repr(value)
    if re.search(r" at 0x[0-9a-f]+", text):
        raise SystemExit(f"gen_construct_reference: no stable rendering of the default {text}; add one")
    return text


def signature_of(cls: type) -> inspect.Signature:
    """The props' signature: a dataclass's fields, or ``__init__`` as the class defines it."""
    return inspect.signature(cls) if dataclasses.is_dataclass(cls) else inspect.signature(vars(cls)["__init__"])


def text_of(doc: str) -> str:
    """reStructuredText roles and literals as Markdown: ````x```` and ``:class:`x``` become ```x```."""
    doc = re.sub(r":(?:class|attr|data|mod):`~?([^`]+)`", lambda m: f"`{m.group(1).split('.')[-1]}`", doc)
    doc = re.sub(r":meth:`~?([^`]+)`", lambda m: f"`{m.group(1).split('.')[-1]}()`", doc)
    return doc.replace("``", "`")


def annotation_text(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, str):
        return annotation
    return re.sub(r"\b(?:typing|collections\.abc|hyperpod_cdk\.\w+)\.", "", inspect.formatannotation(annotation))


def props_of(cls: type) -> list[Prop]:
    """The props in signature order; a dataclass field may be described by the string under it instead."""
    _, described = split_docstring(cls.__doc__ or "")
    if dataclasses.is_dataclass(cls):
        described = {**field_docstrings(cls), **described}
    props = []
    for name, parameter in signature_of(cls).parameters.items():
        if name in SKIPPED_PARAMETERS:
            continue
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            stack_props = (
                "keyword arguments of `aws_cdk.Stack` (`env`, `description`, `synthesizer`, ...). Default: none."
            )
            props.append(Prop(f"**{name}", "", "", described.get(name, stack_props)))
            continue
        default = "required" if parameter.default is inspect.Parameter.empty else render_value(parameter.default)
        description = " ".join(text_of(described.get(name, "")).split())
        props.append(Prop(name, annotation_text(parameter.annotation), default, description))
    return props


def members_of(cls: type) -> Iterator[tuple[str, str]]:
    """Public properties and methods the class itself defines, with the first line of their docstring."""
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            doc = member.fget.__doc__ if member.fget else None
            yield f"`{name}`", first_line(doc)
        elif isinstance(member, staticmethod | classmethod) or inspect.isfunction(member):
            function: Callable[..., Any] = member.__func__ if isinstance(member, staticmethod | classmethod) else member
            yield f"`{name}()`", first_line(function.__doc__)


def first_line(doc: str | None) -> str:
    if not doc:
        return ""
    return text_of(inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " "))


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def code(text: str) -> str:
    return f"`{text}`" if text else ""


def load(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)


def section(module: str, name: str) -> tuple[list[str], list[str]]:
    """The class's section and the names of its props that lack a documented default."""
    cls = load(module, name)
    prose, _ = split_docstring(cls.__doc__ or "")
    home = "hyperpod_cdk" if name in importlib.import_module("hyperpod_cdk").__all__ else module
    lines = [f"## `{name}`", "", f"`from {home} import {name}` (defined in `{cls.__module__}`)", ""]
    lines += [text_of(prose), ""] if prose else []
    props = props_of(cls)
    lacking = [f"`{name}.{prop.name}`" for prop in props if prop.lacks_default or not prop.description]
    if props:
        lines += ["| Prop | Type | Default | Description |", "|---|---|---|---|"]
        for prop in props:
            flags = []
            if not prop.description:
                flags.append("**undocumented**")
            elif prop.lacks_default:
                flags.append("**(docstring gives no default)**")
            description = " ".join([prop.description, *flags]).strip()
            default = prop.default if prop.default in ("required", "") else code(prop.default)
            lines.append(f"| `{prop.name}` | {cell(code(prop.type))} | {cell(default)} | {cell(description)} |")
        lines.append("")
    members = list(members_of(cls))
    if members:
        lines += ["| Attribute or method | |", "|---|---|"]
        lines += [f"| {member} | {cell(doc)} |" for member, doc in members]
        lines.append("")
    return lines, lacking


def enums() -> list[type[enum.Enum]]:
    module = importlib.import_module(ENUMS_MODULE)
    found = [value for value in vars(module).values() if isinstance(value, type) and issubclass(value, enum.Enum)]
    return [cls for cls in found if cls.__module__ == ENUMS_MODULE]


def enum_section(cls: type[enum.Enum]) -> list[str]:
    values = ", ".join(f"`{member.name}` (`{member.value}`)" for member in cls)
    summary = first_line(cls.__doc__)
    return [f"### `{cls.__name__}`", "", *([summary, ""] if summary else []), f"Members: {values}.", ""]


def render() -> str:
    lines = [
        "# Construct reference",
        "",
        "<!-- Generated by scripts/gen_construct_reference.py from the classes' docstrings and signatures: edit "
        "the `:param` lines there, then run it (or `make docs`). tests/test_docs.py fails while this file is "
        "stale. -->",
        "",
        "Every construct, stack and value object `hyperpod_cdk` exports, with its props: the type and the "
        "default come from the signature, the description from the class's `:param` lines. All props are "
        "keyword-only; a construct's first two arguments are CDK's `scope` and `id`. How to embed them in a "
        "stack of your own: [README](../README.md#2-embed-single-constructs-in-your-own-stacks).",
        "",
    ]
    lines += [f"- [`{name}`](#{name.lower()})" for _, name in CLASSES]
    lines += [
        "- [Enumerations](#enumerations)",
        "- [Props without a documented default](#props-without-a-documented-default)",
        "",
    ]
    all_lacking: list[str] = []
    for module, name in CLASSES:
        body, lacking = section(module, name)
        lines += body
        all_lacking += lacking
    lines += ["## Enumerations", ""]
    lines += [f"Defined in `{ENUMS_MODULE}`.", ""]
    for cls in enums():
        lines += enum_section(cls)
    lines += [
        "## Props without a documented default",
        "",
        "Optional props whose `:param` line does not say `Default:` (aws-cdk's awslint requires one on every "
        "optional prop), and props with no `:param` line at all:",
        "",
    ]
    lines += [f"- {name}" for name in all_lacking] if all_lacking else ["None."]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    sys.exit(docgen.main(DOC, render, __doc__))
