"""Reading Slurm's output where users write some of the fields, and checking the ids that go on a command line.

A job's name, comment, working directory and output paths are the user's text: ``scontrol -o show job`` prints
them among Slurm's own ``Key=Value`` fields, so a job named ``x JobId=1;id`` or ``x AdminComment=...`` looks like
another field to a reader that splits the line. So job fields are read with ``squeue --Format`` naming only fields
Slurm writes itself, each ended with a ``|`` (squeue(1), ``-O``: "type[:[.][size][suffix]]", the suffix an
"Arbitrary string to append to the end of the field"; size 0 prints the whole value). Slurm 22.05, 24.11 and 26.05
print these fields alike; ``--json`` needs the data_parser plugins, which a Slurm build may lack, and 22.05's
``squeue --json`` ignores the filters ("All other formatting and filtering arguments will be ignored").

Every job id and node name read that way is checked against its grammar before it goes on a command line
(:func:`job_id`, :func:`node_name`); anything else is refused, never passed on. Stdlib only (Python 3.8).
"""

from __future__ import annotations

import re
from typing import List, Optional, Sequence

JOB_ID = re.compile(r"\d+(?:_\d+|\+\d+)?")
"""A job id as squeue prints one job: ``123``, an array element ``123_4``, a heterogeneous job's component
``123+1`` (Slurm's heterogeneous_jobs.html: components are reported "using the format
<het_job_id>+<het_job_offset>")."""
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A Slurm node name as this project's clusters have them (``ip-10-1-2-3``, ``<group>-<n>``): a host name."""
NOT_SET = ("", "N/A", "(null)")
"""What squeue prints for a field that has no value (``N/A``; ``(null)`` for an unset string)."""
SEPARATOR = "|"


class SlurmTextError(ValueError):
    """Slurm's output did not have the form the reader asked for (a field count, an id's grammar)."""


def job_id(text: str) -> str:
    """``text`` when it is a job id (:data:`JOB_ID`, the whole string); else a :class:`SlurmTextError`."""
    if not JOB_ID.fullmatch(text):
        raise SlurmTextError("{!r} is not a Slurm job id (digits, then _<task> or +<component>)".format(text[:80]))
    return text


def node_name(text: str) -> str:
    """``text`` when it is a node name (:data:`NODE_NAME`, the whole string); else a :class:`SlurmTextError`."""
    if not NODE_NAME.fullmatch(text):
        raise SlurmTextError("{!r} is not a Slurm node name (letters, digits, '.', '_', '-')".format(text[:80]))
    return text


def format_option(fields: Sequence[str]) -> str:
    """``squeue -O``'s value for ``fields``: each printed whole (size 0) and ended with ``|``, the last bare."""
    return ",".join(name + ":" + ("" if i == len(fields) - 1 else SEPARATOR) for i, name in enumerate(fields))


def split_line(line: str, count: int) -> Optional[List[str]]:
    """One line of ``squeue -O`` output (:func:`format_option`) as ``count`` stripped fields; None for a blank
    line. Only the last field may hold the separator (it is split off first); a line with too few fields is a
    :class:`SlurmTextError`."""
    if not line.strip():
        return None
    parts = line.split(SEPARATOR, count - 1)
    if len(parts) != count:
        raise SlurmTextError("expected {} fields separated by {!r}, got {!r}".format(count, SEPARATOR, line[:200]))
    return [p.strip() for p in parts]


def value(field: str) -> Optional[str]:
    """A field's value, or None where squeue printed that it has none (:data:`NOT_SET`)."""
    return None if field in NOT_SET else field
