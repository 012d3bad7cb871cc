"""The Slurm security gate in ``plan`` and ``status --slurm``: the answer for a config's Slurm and for the releases
a cluster runs, from the one table and verdict (:mod:`training_runtime.slurm_security`).

``plan`` knows only the config: the Slurm major is ``runtime.slurm.version`` in lifecycle-driven mode, else the AMI's
default (``hyperpod_facts.AMI_SLURM_VERSIONS[0]``, whose release AWS's release notes give), and a group with a custom
AMI (``image_id``) runs whatever Slurm that AMI carries, which only the running cluster can say. ``status --slurm``
reads the releases running (the controller's ``scontrol --version`` and each node's slurmd ``Version=``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from training_runtime import slurm_security
from training_runtime.hyperpod_facts import AMI_SLURM_VERSIONS
from training_runtime.options import parse_options
from training_runtime.params import LIFECYCLE_DRIVEN

DOC = "docs/operations.md, Slurm security releases"


def config_major(config: Any) -> tuple[str, str]:
    """(the Slurm major the config deploys, where it comes from)."""
    try:
        version = parse_options(dict(config.runtime), "runtime", check_values=False).slurm.version
    except ValueError:
        version = None
    if version is not None and config.mode == LIFECYCLE_DRIVEN:
        return version, "runtime.slurm.version"
    return AMI_SLURM_VERSIONS[0], "the AMI's default (runtime.slurm.version unset)"


def for_config(config: Any) -> dict[str, Any]:
    """The answer for the Slurm a config deploys, as ``plan --json`` gives it."""
    custom = [g.name for g in config.instance_groups if getattr(g, "image_id", None)]
    major, where = config_major(config)
    answer = slurm_security.ami_verdict(major)
    found: dict[str, Any] = {
        "major": major,
        "from": where,
        "release": slurm_security.ami_release(major),
        "affected": answer.affected,
        "cves": list(answer.cves),
        "fixed_by": answer.fixed_by(),
        "summary": slurm_security.ami_summary(major),
        "custom_ami_groups": custom,
        "table_checked": slurm_security.table_date(),
    }
    return found


def config_line(found: Mapping[str, Any]) -> str:
    """``plan``'s one line."""
    text = f"Slurm security: {found['major']}, {found['from']}: {found['summary']}"
    if found["custom_ami_groups"]:
        text += (
            f". Groups {', '.join(found['custom_ami_groups'])} use a custom AMI: its Slurm is not known here; "
            "`status --slurm` reads it"
        )
    return f"{text} ({DOC})"


def for_running(versions: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
    """Each release running (-> the nodes that run it), judged; a version the table cannot read says so."""
    found = []
    for version, where in sorted(versions.items()):
        entry: dict[str, Any] = {"version": version, "where": list(where)}
        try:
            answer = slurm_security.verdict(version)
        except ValueError as error:
            found.append({**entry, "affected": None, "summary": str(error)})
            continue
        found.append(
            {
                **entry,
                "affected": answer.affected,
                "cves": list(answer.cves),
                "fixed_by": answer.fixed_by(),
                "summary": answer.summary(),
            }
        )
    return found


def running_lines(found: Sequence[Mapping[str, Any]]) -> list[str]:
    """``status --slurm``'s lines, one per release running."""
    lines = []
    for entry in found:
        where = entry["where"]
        shown = ", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
        lines.append(f"Slurm security: {entry['summary']} (on {shown}; {DOC})")
    return lines
