"""plugstack.conf as the guard wants it: includes by a path copied in (configless), one Pyxis registration.

Pure text functions over a ``read`` callback that gives the lines an ``include`` target names (None: no such file),
so the checks (:mod:`training_runtime.guard.checks`) run them on the controller's files and unit tests on strings.

* :func:`inline`: slurmctld sends configless nodes only includes "with no path separators" (SchedMD,
  configless_slurm.html; the guard's table, :mod:`training_runtime.guard.table`), so each ``include <path>`` becomes
  the included lines between two guard markers. A block already there is refreshed from its file, so a copy never
  goes stale; a file that is gone keeps its last copy.
* :func:`dedupe`: of the lines that load ``spank_pyxis.so`` (directly, or through a file that loads nothing else),
  the first is kept and every later one commented out with the guard's note. A second registration inside a file
  that also loads other plug-ins is left as it is and returned, to be reported.
"""

from __future__ import annotations

import re
from typing import Callable, List, Optional, Tuple

from training_runtime.guard.conf import active, include_target, loads_pyxis

Read = Callable[[str], Optional[List[str]]]
"""An include target -> the lines of the file(s) it names (a wildcard's matches, in order), or None."""

BEGIN = "# hyperpod-cdk Slurm guard: `include {}` copied in (configless Slurm sends no include with a path)"
END = "# hyperpod-cdk Slurm guard: end of `include {}`"
BEGIN_LINE = re.compile(r"^# hyperpod-cdk Slurm guard: `include (\S+)` copied in")
DUPLICATE = "# hyperpod-cdk Slurm guard: a second Pyxis registration, commented out: {}"


def _join(lines: List[str], like: str) -> str:
    return "\n".join(lines) + ("\n" if lines and (like.endswith("\n") or not like) else "")


def inline(text: str, read: Read) -> Tuple[str, List[str], List[str]]:
    """(``text`` with every ``include`` of a path copied in, the targets copied in now, the blocks refreshed)."""
    lines = text.splitlines()
    out: List[str] = []
    added: List[str] = []
    refreshed: List[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        begin = BEGIN_LINE.match(line)
        if begin:
            target = begin.group(1)
            end = next((j for j in range(index + 1, len(lines)) if lines[j] == END.format(target)), None)
            if end is not None:
                old = lines[index + 1 : end]
                new = read(target)
                if new is not None and new != old:
                    refreshed.append(target)
                out += [line, *(new if new is not None else old), lines[end]]
                index = end + 1
                continue
        target = include_target(line)
        body = read(target) if target is not None and "/" in target else None
        if target is not None and body is not None:
            out += [BEGIN.format(target), *body, END.format(target)]
            added.append(target)
        else:
            out.append(line)
        index += 1
    return _join(out, text), added, refreshed


def copied(text: str) -> List[str]:
    """The include targets whose lines ``text`` holds between the guard's markers."""
    return [m.group(1) for m in map(BEGIN_LINE.match, text.splitlines()) if m]


def dedupe(text: str, read: Read) -> Tuple[str, List[str], List[str]]:
    """(``text`` with every Pyxis registration after the first commented out, the lines commented out, the
    includes that register Pyxis again among other plug-ins: reported, not edited)."""
    lines = text.splitlines()
    first: Optional[str] = None
    dropped: List[str] = []
    stuck: List[str] = []
    for index, line in enumerate(lines):
        if loads_pyxis(line):
            if first is None:
                first = line
            else:
                lines[index] = DUPLICATE.format(line.strip())
                dropped.append(line.strip())
            continue
        target = include_target(line)
        body = read(target) if target is not None else None
        if target is None or body is None:
            continue
        registrations = [entry for entry in body if loads_pyxis(entry)]
        if not registrations:
            continue
        if first is None:
            first = line
            if len(registrations) > 1:
                stuck.append(target)
            continue
        if all(loads_pyxis(entry) for entry in body if active(entry)):
            lines[index] = DUPLICATE.format(line.strip())
            dropped.append(line.strip())
        else:
            stuck.append(target)
    return _join(lines, text), dropped, stuck
