"""Reading a config file (YAML or JSON) with bounds, so a hostile file is refused fast instead of hanging.

Three bounds, each far above a real config (the largest example is 2.3 KB, about 100 nodes, 6 levels deep):

- :data:`MAX_CONFIG_BYTES`: the file is refused before it is parsed (only that many bytes plus one are read).
- :data:`MAX_CONFIG_NODES`: YAML nodes, counted while the document is composed, an alias counting as every node
  of what it names (so a "billion laughs" file of nested aliases stops at the bound, not at its expansion).
  Anchors and aliases (and ``<<`` merge keys) keep working below it; an alias to a node that contains it is
  refused (a config is a tree).
- :data:`MAX_CONFIG_DEPTH`: nesting levels; deeper is a clear error, never a ``RecursionError``.

Every refusal is a :class:`ConfigurationError` naming the file, the bound and how to fix it, so ``validate``
exits 1 ("errors") and synth stops with one ``error:`` line, as for any other bad config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from hyperpod_cdk.core.errors import ConfigurationError
from training_runtime.problems import Problem

MAX_CONFIG_BYTES = 2 * 1024 * 1024
"""2 MiB: about 2,500 users with 4096-bit RSA keys; the largest example is 2.3 KB."""
MAX_CONFIG_NODES = 100_000
"""YAML nodes (every scalar, list and mapping, aliases expanded); the largest example has about 100."""
MAX_CONFIG_DEPTH = 64
"""Nesting levels of lists and mappings; the examples have at most 6."""

FILE_RULE = "CFG-FILE"
"""The id of the file's own checks: readable, YAML, within the bounds above."""


class _TooBig(yaml.YAMLError):
    """A bound was passed while composing; ``problem`` says which."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, counting nodes (aliases expanded) and depth as it composes the document."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._nodes = 0
        self._depth = 0
        self._sizes: dict[int, int] = {}  # id(node) -> its node count, aliases inside it expanded

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            anchor = self.peek_event().anchor  # type: ignore[no-untyped-call]
            named = self.anchors.get(anchor)
            if named is not None:
                size = self._sizes.get(id(named))
                if size is None:
                    raise _TooBig(
                        f"the alias *{_bounded(anchor, 80)} refers to a node that contains it", "a config is a tree"
                    )
                self._count(size)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_CONFIG_DEPTH:
            raise _TooBig(
                f"lists and mappings are nested more than {MAX_CONFIG_DEPTH} levels deep",
                "a real config is a few levels deep: check that this is the right file",
            )
        before = self._nodes
        node = super().compose_node(parent, index)
        self._count(1)
        self._sizes[id(node)] = self._nodes - before
        self._depth -= 1
        return node

    def _count(self, size: int) -> None:
        self._nodes += size
        if self._nodes > MAX_CONFIG_NODES:
            raise _TooBig(
                f"more than {MAX_CONFIG_NODES:,} YAML nodes (an alias counts as every node it names)",
                "a real config has a few hundred: write it out plainly, and check that this is the right file",
            )


def read_config_file(path: str | Path) -> Any:
    """The file's data (``{}`` when empty); ConfigurationError when it cannot be read, is no YAML, or passes a
    bound (size, nodes, depth)."""
    path = Path(path)
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise _refused(path, f"cannot read the file: {error}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise _refused(
            path,
            f"the file is larger than {MAX_CONFIG_BYTES:,} bytes, the most a config may be",
            "a cluster config is a few KB: check that this is the right file",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _refused(path, f"the file is not UTF-8 text ({error.reason} at byte {error.start})") from None
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data() or {}
    except _TooBig as error:
        raise _refused(path, error.problem, error.fix) from None
    except RecursionError:  # a bound above should come first; never a traceback all the same
        raise _refused(path, "the file is nested too deeply to read") from None
    except yaml.YAMLError as error:
        raise _refused(path, f"cannot read the file: {_bounded(str(error))}") from None
    finally:
        loader.dispose()


def _refused(path: Path, expected: str, fix: str = "") -> ConfigurationError:
    return ConfigurationError(str(path), [Problem("", expected, fix=fix, rule=FILE_RULE)])


def _bounded(text: str, limit: int = 500) -> str:
    """A parser message, cut: it quotes the offending line, which a hostile file makes as long as it likes."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit:,} more characters)"
