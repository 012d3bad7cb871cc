"""Jobs for a scaled group at 0 are accepted, held, and released by the scaler (docs/scaler.md, "A group at 0").

Slurm 24.11 refuses ``sbatch``/``salloc`` at submission for a partition with no node ("Requested node
configuration is not available"). A job_submit plugin runs in slurmctld on every submission before the job is
tested against the partition's nodes (Slurm's "Job Submit Plugin API",
https://slurm.schedmd.com/job_submit_plugins.html; slurm.conf(5) ``JobSubmitPlugins``: "lua" loads
``job_submit.lua`` from the directory of slurm.conf). The script rendered here holds (priority 0, as ``--hold``
does) a job whose partitions are all without a node and one of them a scaled one, and marks it with the
AdminComment :func:`held_comment`; every other job passes untouched. The scaler counts a job held with that mark
as demand and releases it (``scontrol release``); a job held by its user or an admin (no mark) is never released.

AWS does not document ``JobSubmitPlugins`` on HyperPod (neither the Slurm configuration pages nor the lifecycle
script samples name it): the runtime sets it in the ``accounting.conf`` that HyperPod's slurm.conf includes, and
leaves an existing ``JobSubmitPlugins`` or a ``job_submit.lua`` that is not its own alone (steps/scaler.py).
"""

from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple

from training_runtime.scaler.policy import DRAIN_REASON_START

SCRIPT_NAME = "job_submit.lua"
SCRIPT_HEADER = "-- Written by hyperpod-cdk (the capacity scaler, docs/scaler.md); edits are overwritten.\n"
"""The first line of the runtime's script: a ``job_submit.lua`` without it is someone else's and left alone."""
HELD_START = DRAIN_REASON_START + " held until group "
"""A job's AdminComment that the script wrote starts so: :func:`held_comment`."""
PLUGIN_KEY = "JobSubmitPlugins"
PLUGIN_LINE = PLUGIN_KEY + "=lua"
BLOCK_START = "# hyperpod-cdk scaler: begin (jobs for a scaled group at 0 are held, not refused; docs/scaler.md)\n"
BLOCK_END = "# hyperpod-cdk scaler: end\n"
BLOCK = BLOCK_START + PLUGIN_LINE + "\n" + BLOCK_END
"""What the runtime adds to the included ``accounting.conf`` (kept by the accounting step when it rewrites it)."""
_BLOCK = re.compile(re.escape(BLOCK_START) + r".*?" + re.escape(BLOCK_END), re.DOTALL)
_PLUGIN_SET = re.compile(r"^[ \t]*" + PLUGIN_KEY + r"[ \t]*=", re.IGNORECASE | re.MULTILINE)


def held_comment(group: str) -> str:
    return "{}{} has nodes".format(HELD_START, group)


def held_by_scaler(admin_comment: Optional[str]) -> bool:
    """Whether the script held the job (its mark); a user's or an admin's hold has no such AdminComment."""
    return bool(admin_comment) and str(admin_comment).startswith(HELD_START)


def _lua_string(text: str) -> str:
    """``text`` as a Lua 5.1 string literal: printable ASCII as it is (``\\`` and ``"`` escaped), every other byte
    of its UTF-8 as a decimal escape (``\\010``), so no newline or control character reaches the script raw."""
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char in '\\"':
            out.append("\\" + char)
        elif 0x20 <= byte < 0x7F:
            out.append(char)
        else:
            out.append("\\{:03d}".format(byte))
    return '"' + "".join(out) + '"'


def render_script(partitions: Sequence[Tuple[str, str]]) -> str:
    """``job_submit.lua`` for the scaled ``(partition, group)`` pairs, in a stable order (Lua 5.1, Slurm's
    ``slurm_job_submit(job_desc, part_list, submit_uid)`` API: ``part_list`` holds the partitions the user may
    use, each with ``name``, ``total_nodes`` and ``flag_default``)."""
    scaled = "".join("  [{}] = {},\n".format(_lua_string(p), _lua_string(g)) for p, g in sorted(set(partitions)))
    return (
        SCRIPT_HEADER
        + "-- Holds a job whose partitions have no node when one of them belongs to a scaled group, instead of Slurm\n"
        "-- refusing it; the scaler adds nodes and releases it (scontrol release). Every other job passes untouched.\n"
        "local SCALED = {\n" + scaled + "}\n"
        "local HELD = " + _lua_string(HELD_START) + "\n"
        "\n"
        "function slurm_job_submit(job_desc, part_list, submit_uid)\n"
        "  if job_desc.priority == 0 or job_desc.admin_comment ~= nil then\n"
        "    return slurm.SUCCESS -- held by its user, or an admin's comment: not ours\n"
        "  end\n"
        "  local parts, names = {}, {}\n"
        "  for _, part in pairs(part_list) do\n"
        "    parts[part.name] = part\n"
        "    if job_desc.partition == nil and part.flag_default ~= nil and part.flag_default ~= 0 then\n"
        "      names = { part.name }\n"
        "    end\n"
        "  end\n"
        "  if job_desc.partition ~= nil then\n"
        '    for name in string.gmatch(job_desc.partition, "[^,]+") do table.insert(names, name) end\n'
        "  end\n"
        "  local group = nil\n"
        "  for _, name in ipairs(names) do\n"
        "    local part = parts[name]\n"
        "    if part == nil or (part.total_nodes ~= nil and part.total_nodes > 0) then\n"
        "      return slurm.SUCCESS -- a partition with nodes, or one Slurm judges itself\n"
        "    end\n"
        "    group = group or SCALED[name]\n"
        "  end\n"
        "  if group ~= nil then\n"
        "    job_desc.priority = 0\n"
        '    job_desc.admin_comment = HELD .. group .. " has nodes"\n'
        '    slurm.log_info("hyperpod-cdk: job of uid %d held until group %s has nodes", submit_uid, group)\n'
        "  end\n"
        "  return slurm.SUCCESS\n"
        "end\n"
        "\n"
        "function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)\n"
        "  return slurm.SUCCESS\n"
        "end\n"
        "\n"
        "return slurm.SUCCESS\n"
    )


def without_block(text: str) -> str:
    """``text`` without the runtime's block."""
    return _BLOCK.sub("", text)


def with_block(text: str) -> str:
    """``text`` with the runtime's block, once, at its end."""
    rest = without_block(text)
    return rest + ("" if not rest or rest.endswith("\n") else "\n") + BLOCK


def plugins_set_elsewhere(text: str) -> bool:
    """Whether ``text`` (slurm.conf, or accounting.conf outside the runtime's block) sets ``JobSubmitPlugins``."""
    return bool(_PLUGIN_SET.search(without_block(text)))
