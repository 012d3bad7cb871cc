#!/usr/bin/env python3
"""Write ``training_runtime.instance_table`` and docs/instance-types.md from the instance-type hardware facts.

``src/hyperpod_cdk/data/instance_hardware.json`` holds EC2's description of every type HyperPod offers (written by
scripts/refresh_instance_facts.py from DescribeInstanceTypes), each entry with its source and date, plus two hand-kept
sections with their own sources (``layout``: sockets, NVSwitch, default NeuronCores; ``gpudirect_storage``). The node
runtime reads no JSON from the package (stdlib only, Python 3.8, and it is not installed with ``hyperpod_cdk``), so this
script writes the facts as a module of literals, and the table as a doc::

    .venv/bin/python scripts/gen_instance_facts.py          # rewrite both
    .venv/bin/python scripts/gen_instance_facts.py --check  # exit 1 if a committed copy is stale or an entry is bad

tests/test_instance_facts.py fails while either is stale, or while an offered type lacks an entry, a source or a date.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "src" / "hyperpod_cdk" / "data" / "instance_hardware.json"
OFFERED = ROOT / "src" / "hyperpod_cdk" / "data" / "instance_types_by_region.json"
MODULE = ROOT / "src" / "training_runtime" / "instance_table.py"
DOC = ROOT / "docs" / "instance-types.md"
WIDTH = 120
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
KINDS = ("nvidia-gpu", "neuron", "none")
ARCHITECTURES = ("x86_64", "arm64")
FIELDS = (
    "vcpus",
    "cores",
    "threads_per_core",
    "valid_threads_per_core",
    "memory_mib",
    "architecture",
    "accelerator",
    "efa",
    "instance_store",
)
COLUMNS = (
    "source, vcpus, cores, threads_per_core, valid_threads_per_core, memory_mib, architecture, accelerator kind, "
    "accelerators, accelerator model, accelerator memory_mib, cores per accelerator, EFA interfaces (0: no EFA), "
    "instance store disks, disk size GB, NVMe"
)


def load(path: Path = DATA) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def offered() -> list[str]:
    document = json.loads(OFFERED.read_text())
    return sorted({t for types in document["regions"].values() for t in types} | set(document["api_only"]))


def entry_problems(name: str, entry: dict[str, Any]) -> list[str]:
    """What makes one type's entry unusable: no source or date, a missing field, a value of the wrong kind. A field
    is either fully known or null (unknown); an unknown type says so in its source."""
    found = []
    if not isinstance(entry.get("source"), str) or not entry["source"]:
        found.append(f"{name}: no source")
    if not DATE.match(str(entry.get("checked", ""))):
        found.append(f"{name}: checked {entry.get('checked')!r} is not a date (YYYY-MM-DD)")
    missing = [f for f in FIELDS if f not in entry]
    if missing:
        found.append(f"{name}: missing {', '.join(missing)} (null when unknown)")
        return found
    unknown = [f for f in FIELDS if entry[f] is None]
    if unknown and not entry["source"].startswith("unknown"):
        found.append(f"{name}: {', '.join(unknown)} unknown, but the source does not start with 'unknown'")
    accelerator = entry["accelerator"]
    if accelerator is not None and accelerator.get("kind") not in KINDS:
        found.append(f"{name}: accelerator kind {accelerator.get('kind')!r}; allowed: {', '.join(KINDS)}")
    if entry["architecture"] is not None and entry["architecture"] not in ARCHITECTURES:
        found.append(f"{name}: architecture {entry['architecture']!r}; allowed: {', '.join(ARCHITECTURES)}")
    valid = entry["valid_threads_per_core"]
    if valid is not None and entry["threads_per_core"] not in valid:
        found.append(f"{name}: default threads per core {entry['threads_per_core']} is not among {valid}")
    vcpus, cores, threads = entry["vcpus"], entry["cores"], entry["threads_per_core"]
    if None not in (vcpus, cores, threads) and vcpus != cores * threads:
        found.append(f"{name}: vcpus {vcpus} != cores {cores} * threads per core {threads}")
    return found


def problems(document: dict[str, Any]) -> list[str]:
    """Every problem of the document: an offered type without an entry, a bad entry, a hand-kept section without
    its source, or naming a type that is not offered."""
    types = document.get("types", {})
    found = [f"{name}: HyperPod offers it, but it has no entry" for name in offered() if name not in types]
    for name, entry in sorted(types.items()):
        found += entry_problems(name, entry)
    for section in ("layout", "gpudirect_storage"):
        part = document.get(section, {})
        if not part.get("source") or not DATE.match(str(part.get("checked", ""))):
            found.append(f"{section}: needs a source and a checked date")
        found += [f"{section}: {name} is not an offered type" for name in part.get("types", ()) if name not in types]
    return found


def _row(name: str, entry: dict[str, Any], source: int) -> tuple[Any, ...]:
    accelerator = entry["accelerator"] or {}
    efa = entry["efa"]
    store = entry["instance_store"] or {}
    valid = entry["valid_threads_per_core"]
    return (
        source,
        entry["vcpus"],
        entry["cores"],
        entry["threads_per_core"],
        tuple(valid) if valid is not None else None,
        entry["memory_mib"],
        entry["architecture"],
        accelerator.get("kind"),
        accelerator.get("count"),
        accelerator.get("model"),
        accelerator.get("memory_mib"),
        accelerator.get("cores_per_device"),
        None if efa is None else (efa["max_interfaces"] if efa["supported"] else 0),
        store.get("count"),
        store.get("size_gb"),
        store.get("nvme"),
    )


def _sources(document: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted({(e["source"], e["checked"]) for e in document["types"].values()})


def _literal(name: str, value: Any, indent: str = "    ") -> list[str]:
    line = f"{indent}{name!r}: {value!r},"
    if len(line) <= WIDTH:
        return [line]
    inner = repr(value)[1:-1]
    return [f"{indent}{name!r}: (", f"{indent}    {inner},", f"{indent}),"]


def render_module(document: dict[str, Any]) -> str:
    sources = _sources(document)
    index = {pair: i for i, pair in enumerate(sources)}
    layout, gds = document["layout"], document["gpudirect_storage"]
    lines = [
        '"""EC2\'s hardware facts of every type HyperPod offers: literals for training_runtime.instance_facts.',
        "",
        "Generated by scripts/gen_instance_facts.py from src/hyperpod_cdk/data/instance_hardware.json: do not edit;",
        "refresh the data (scripts/refresh_instance_facts.py) or edit its hand-kept sections, then run the generator.",
        '"""',
        "",
        "SOURCES = (",
        *[f"    ({_string(s, 8)}, {d!r})," for s, d in sources],
        ")",
        '"""(source, date read) of the entries: an entry\'s first element is its index here."""',
        "",
        f"LAYOUT_SOURCE = {_string(layout['source'], 4)}",
        f"LAYOUT_CHECKED = {layout['checked']!r}",
        f"GPUDIRECT_STORAGE_SOURCE = {gds['source']!r}",
        f"GPUDIRECT_STORAGE_QUOTE = {_string(gds['quote'], 4)}",
        f"GPUDIRECT_STORAGE_CHECKED = {gds['checked']!r}",
        "",
        "# " + "\n# ".join(_wrapped(COLUMNS + "; None: unknown", WIDTH - 2)),
        "TYPES = {",
    ]
    for name, entry in sorted(document["types"].items()):
        lines += _literal(name, _row(name, entry, index[(entry["source"], entry["checked"])]))
    lines += ["}", "", "# sockets, nvswitch, neuron_cores (None: EC2's count)", "LAYOUT = {"]
    for name, item in sorted(layout["types"].items()):
        lines += _literal(name, (item.get("sockets", 1), item.get("nvswitch", False), item.get("neuron_cores")))
    lines += ["}", "", "GPUDIRECT_STORAGE = ("]
    lines += [f"    {name!r}," for name in sorted(gds["types"])]
    lines += [")", ""]
    return "\n".join(lines)


def _string(text: str, indent: int) -> str:
    """``text`` as a literal; a long one as parenthesised pieces on lines of their own (``indent`` spaces)."""
    if len(text) < WIDTH - 40:
        return repr(text)
    import textwrap

    pieces = textwrap.wrap(text, WIDTH - indent - 8, drop_whitespace=False, break_on_hyphens=False)
    assert "".join(pieces) == text
    inner = "".join(f"\n{' ' * indent}{piece!r}" for piece in pieces)
    return f"({inner}\n{' ' * (indent - 4)})"


def _wrapped(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width)


def _gib(mib: int | None) -> str:
    return "?" if mib is None else f"{mib / 1024:g}"


def _cells(entry: dict[str, Any], key: int) -> list[str]:
    if entry["vcpus"] is None:
        return ["?"] * 8 + [f"[{key}]"]
    accelerator, efa, store = entry["accelerator"], entry["efa"], entry["instance_store"]
    if accelerator["kind"] == "none":
        shown = "none"
    else:
        memory = _gib(accelerator["memory_mib"])
        shown = f"{accelerator['count']} x {accelerator['model']} ({accelerator['kind']}, {memory} GiB)"
    disks = f"{store['count']} x {store['size_gb']} GB{' NVMe' if store['nvme'] else ''}" if store["count"] else "—"
    valid = ", ".join(str(v) for v in entry["valid_threads_per_core"])
    return [
        str(entry["vcpus"]),
        str(entry["cores"]),
        f"{entry['threads_per_core']} ({valid})",
        _gib(entry["memory_mib"]),
        entry["architecture"],
        shown,
        str(efa["max_interfaces"]) if efa["supported"] else "—",
        disks,
        f"[{key}]",
    ]


def render_doc(document: dict[str, Any]) -> str:
    sources = _sources(document)
    index = {pair: i + 1 for i, pair in enumerate(sources)}
    layout, gds = document["layout"], document["gpudirect_storage"]
    lines = [
        "# Instance types: hardware facts",
        "",
        "Generated by `scripts/gen_instance_facts.py` from `src/hyperpod_cdk/data/instance_hardware.json`: do not",
        "edit.",
        "Every instance type HyperPod offers (any Region's list, plus the types only its API names), as EC2 describes",
        "`X` for `ml.X`. The validator's rules decide from these facts, never from the type's name: ThreadsPerCore",
        "(`GRP-THREADS-PER-CORE`, cfn-lint E9220), deep health checks per accelerator kind (cfn-lint E9221,",
        "`GRP-DEEP-HEALTH-CONNECTIVITY`, `GRP-DEEP-HEALTH-ACCELERATED`), types whose facts are unknown",
        "(`GRP-HARDWARE-UNKNOWN`), GPUDirect Storage (`FSX-EFA-CLIENTS`); the node runtime sizes slurm.conf from them.",
        "`?` is unknown: no source read describes the type, and nothing is guessed. Refresh where credentials exist:",
        "",
        "    .venv/bin/python scripts/refresh_instance_facts.py --region us-east-1   # DescribeInstanceTypes",
        "    .venv/bin/python scripts/gen_instance_facts.py",
        "",
        "## Sources",
        "",
        *[f"{index[pair]}. {pair[0]}, read {pair[1]}." for pair in sources],
        "",
        f"Kept by hand, as EC2 does not describe them: sockets, NVSwitch and default NeuronCores ({layout['source']};",
        f'checked {layout["checked"]}); GPUDirect Storage with FSx for Lustre ({gds["source"]}: "{gds["quote"]}";',
        f"{gds['note']}; checked {gds['checked']}): {', '.join(sorted(gds['types']))}.",
        "",
        "## Where AWS's sources disagree or are silent",
        "",
        "- **ThreadsPerCore 1 where EC2 lists only 2.** HyperPod's API reference (ClusterInstanceGroupSpecification):",
        '  "For instance types that support multithreading, you can specify 1 for disabling multithreading and 2 for',
        "  enabling multithreading. For instance types that doesn't support multithreading, specify 1.\" EC2's",
        "  ValidThreadsPerCore is `2` alone for "
        + ", ".join(f"`{n}`" for n, e in sorted(document["types"].items()) if e["valid_threads_per_core"] == [2])
        + ":",
        "  EC2's own CPU options cannot turn SMT off there, and HyperPod does not say how it applies 1. hyperpod-cdk",
        "  follows HyperPod's page (1 accepted; slurm.conf then declares the cores, which errs low). Check on a small",
        "  group before relying on SMT being off on these types.",
        "- **ThreadsPerCore 2 where EC2 lists only 1** (Graviton, and x86 types such as `m8a`, `c8a`, `g7`): both",
        "  sources agree it is not allowed; `GRP-THREADS-PER-CORE` and cfn-lint E9220 refuse it.",
        '- **InstanceConnectivity.** The Slurm deep-health-check page: "This check requires at least 2 nodes and is',
        '  only supported on instances with multi-node GPU communication capabilities." It is refused on a type EC2',
        "  describes without an NVIDIA GPU, Neuron types included (`GRP-DEEP-HEALTH-CONNECTIVITY`, E9221); AWS does",
        "  not list which GPU types qualify, so a GPU type without EFA gets a warning (`GRP-DEEP-HEALTH-ACCELERATED`).",
        "  The EKS page lists an NCCOM cluster test for Trainium; the Slurm page does not, and decides.",
        "  InstanceStress runs CPU, memory and disk stress on every type (the Slurm page): accepted everywhere.",
        "",
        "## Types",
        "",
        "| Type | vCPUs | Cores | Threads per core (valid) | Memory GiB | Architecture | Accelerators | EFA interfaces "
        "| Instance store | Source |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in sorted(document["types"].items()):
        cells = _cells(entry, index[(entry["source"], entry["checked"])])
        lines.append("| " + " | ".join([f"`{name}`", *cells]) + " |")
    return "\n".join(lines) + "\n"


def formatted(text: str, path: Path) -> str:
    """``text`` as ``ruff format`` (the project's pinned formatter, ``make lint``) writes it."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(path), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout


def outputs() -> dict[Path, str]:
    document = load()
    return {MODULE: formatted(render_module(document), MODULE), DOC: render_doc(document)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed copy is stale")
    args = parser.parse_args(argv)
    found = problems(load())
    if found:
        print("src/hyperpod_cdk/data/instance_hardware.json:\n" + "\n".join("  - " + p for p in found), file=sys.stderr)
        return 1
    stale = []
    for path, text in outputs().items():
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.write_text(text)
    if stale:
        print("stale (run scripts/gen_instance_facts.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
