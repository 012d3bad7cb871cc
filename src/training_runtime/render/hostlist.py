"""Slurm hostlist expressions: ``w[1-3,5],ctl`` <-> ``["ctl", "w1", "w2", "w3", "w5"]``.

Only a name's trailing digits are ranged (``ip-10-1-2-[3-4]``), as Slurm does for one-dimensional
clusters. A range's numbers are printed zero-padded to the width of its lower bound (Slurm's rule),
so ``w[08-10]`` means w08, w09, w10 and ``w[9-10]`` means w9, w10.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Set, Tuple

_TRAILING_DIGITS = re.compile(r"^(.*?)(\d+)$")
_FORBIDDEN = re.compile(r"[\[\],\s]")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def compress(names: Iterable[str]) -> str:
    """The shortest-form hostlist of ``names`` (duplicates dropped; output order is sorted, not input order).

    Names that share a prefix and end in digits are grouped: numbers without a leading zero go into one
    group per prefix; zero-padded numbers (``w007``) go into a group per prefix and width, which also takes
    the unpadded numbers at least that wide (``w08,w09,w10`` -> ``w[08-10]``). Names without trailing
    digits, or made only of digits, are kept as they are. Linear in the number of names apart from sorting.
    """
    literals: Set[str] = set()
    # prefix -> width (0: numbers without a leading zero) -> (number, digits) pairs
    groups: Dict[str, Dict[int, Set[Tuple[int, int]]]] = {}
    for name in names:
        if not isinstance(name, str) or not name or _FORBIDDEN.search(name):
            raise ValueError(
                "hostlist: got {!r}; expected a host name without '[', ']', ',' or whitespace".format(name)
            )
        match = _TRAILING_DIGITS.fullmatch(name)
        if match is None or not match.group(1):
            literals.add(name)
            continue
        prefix, digits = match.group(1), match.group(2)
        padded = len(digits) > 1 and digits[0] == "0"
        groups.setdefault(prefix, {}).setdefault(len(digits) if padded else 0, set()).add((int(digits), len(digits)))

    pieces: List[Tuple[str, int, str]] = [(name, -1, name) for name in literals]
    for prefix, by_width in groups.items():
        natural = by_width.pop(0, set())
        widths = sorted(by_width)
        for number, length in natural:  # an unpadded number joins the widest padded group it fits
            fitting = [w for w in widths if w <= length]
            by_width.setdefault(fitting[-1] if fitting else 0, set()).add((number, length))
        for width, members in by_width.items():
            pieces.append((prefix, width, _bracket(prefix, width, sorted(n for n, _ in members))))
    pieces.sort()
    return ",".join(text for _, _, text in pieces)


def _bracket(prefix: str, width: int, numbers: List[int]) -> str:
    if len(numbers) == 1:
        return prefix + str(numbers[0]).zfill(width)
    ranges: List[str] = []
    start = previous = numbers[0]
    for number in [*numbers[1:], -1]:
        if number == previous + 1:
            previous = number
            continue
        low = str(start).zfill(width)
        ranges.append(low if start == previous else "{}-{}".format(low, str(previous).zfill(width)))
        start = previous = number
    return "{}[{}]".format(prefix, ",".join(ranges))


def expand(expression: str) -> List[str]:
    """The host names of a hostlist expression, in the order written (``w[1-2],ctl`` -> w1, w2, ctl).

    Accepts any number of bracket groups per name (``r[1-2]n[1-2]``); raises ValueError on malformed input.
    """
    if not isinstance(expression, str):
        raise ValueError("hostlist: got {!r}; expected a string".format(expression))
    names: List[str] = []
    for item in _split_top_level(expression):
        if not item:
            raise ValueError("hostlist {!r}: empty name (a doubled, leading or trailing comma)".format(expression))
        names.extend(_expand_item(item, expression))
    return names


def _split_top_level(expression: str) -> List[str]:
    items: List[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(expression):
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError("hostlist {!r}: nested '[' at position {}".format(expression, index))
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError("hostlist {!r}: ']' without '[' at position {}".format(expression, index))
        elif char == "," and depth == 0:
            items.append(expression[start:index])
            start = index + 1
    if depth:
        raise ValueError("hostlist {!r}: '[' is never closed".format(expression))
    if expression:
        items.append(expression[start:])
    return items


def _expand_item(item: str, expression: str) -> List[str]:
    open_at = item.find("[")
    if open_at < 0:
        if _FORBIDDEN.search(item):
            raise ValueError("hostlist {!r}: {!r} contains whitespace".format(expression, item))
        return [item]
    close_at = item.index("]", open_at)
    prefix, body, rest = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
    tails = _expand_item(rest, expression) if rest else [""]
    names: List[str] = []
    for part in body.split(","):
        match = _RANGE.fullmatch(part)
        if match is None:
            raise ValueError(
                "hostlist {!r}: range {!r} in {!r} is not a number or low-high".format(expression, part, item)
            )
        low_text, high_text = match.group(1), match.group(2)
        low, high = int(low_text), int(high_text if high_text is not None else low_text)
        if high < low:
            raise ValueError("hostlist {!r}: range {!r} runs backwards".format(expression, part))
        width = len(low_text)
        for number in range(low, high + 1):
            head = prefix + str(number).zfill(width)
            names.extend(head + tail for tail in tails)
    return names
