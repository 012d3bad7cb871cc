"""The on-disk layout of checkpoints and how to read it: torch-free (drills, tools and the save path use it)."""

from __future__ import annotations

import errno
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

FORMAT = "hyperpod-cdk-checkpoint/1"


MANIFEST = "manifest.json"


POINTER = "latest"


STATE_FILE = "state.pt"


DCP_METADATA = ".metadata"


TORCH_SAVE = "torch.save"


DCP = "dcp"


SHARDS = "shards"
"""The kind :class:`~training_runtime.checkpoint.AsyncCheckpointer` writes: one raw data file and one index per rank
(``shard_<rank>.bin``, ``shard_<rank>.idx``); the manifest's ``ranks`` lists the ranks whose shards it holds."""


REQUIRED_FILE = {TORCH_SAVE: STATE_FILE, DCP: DCP_METADATA}


TMP = ".tmp"


OLD = ".old"


DELETING = ".deleting"


_NAME = re.compile(r"^step_(\d{9,})(\.tmp|\.old|\.deleting)?$")


class CheckpointError(RuntimeError):
    """A checkpoint could not be saved or loaded; the message says what, where and how to fix it."""


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint: its step, its directory and its parsed manifest."""

    step: int
    path: Path
    manifest: Dict[str, Any]


def shard_files(rank: int) -> Tuple[str, str]:
    """(data file, index file) of one rank's shard in a :data:`SHARDS` checkpoint."""
    return "shard_{:05d}.bin".format(rank), "shard_{:05d}.idx".format(rank)


def step_name(step: int) -> str:
    """Directory name of a complete checkpoint, e.g. ``step_000000120``."""
    return "step_{:09d}".format(step)


def latest(root: Union[str, Path]) -> Optional[Checkpoint]:
    """Newest COMPLETE checkpoint, or None. Never returns a partial one.

    The highest complete step wins, whatever the ``latest`` pointer says: the pointer lags when a save was killed
    between its rename and the pointer move.
    """
    checkpoints = complete_checkpoints(root)
    return checkpoints[-1] if checkpoints else None


def complete_checkpoints(root: Union[str, Path]) -> List[Checkpoint]:
    """Every complete checkpoint under ``root``, oldest first; an empty list when ``root`` does not exist.

    ``step_<N>.old`` stands in for ``step_<N>`` only while ``step_<N>`` is absent or incomplete (a re-save of that
    step was killed between its two renames).
    """
    by_step: Dict[int, Checkpoint] = {}
    for path, step, suffix in _entries(Path(root)):
        if suffix not in ("", OLD) or (step in by_step and suffix == OLD):
            continue
        manifest = _complete_manifest(path, step)
        if manifest is not None and (step not in by_step or suffix == ""):
            by_step[step] = Checkpoint(step=step, path=path, manifest=manifest)
    return [by_step[step] for step in sorted(by_step)]


def _entries(root: Path) -> List[Tuple[Path, int, str]]:
    """(path, step, suffix) of every step directory under ``root``, by name; suffix is '' for a published one."""
    try:
        names = os.listdir(str(root))
    except FileNotFoundError:
        return []
    found = []
    for name in sorted(names):
        match = _NAME.fullmatch(name)
        if match:
            found.append((root / name, int(match.group(1)), match.group(2) or ""))
    return found


def _complete_manifest(path: Path, step: int) -> Optional[Dict[str, Any]]:
    """The manifest of a complete checkpoint of ``step`` at ``path``, or None."""
    return _inspect(path, step)[0]


def _inspect(path: Path, step: int) -> Tuple[Optional[Dict[str, Any]], str]:
    """(manifest, '') when ``path`` holds a complete checkpoint of ``step``, else (None, why not)."""
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError) as error:
        return None, "no readable {} ({})".format(MANIFEST, error)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None, "{} is not a {} manifest".format(MANIFEST, FORMAT)
    if manifest.get("step") != step or isinstance(manifest.get("step"), bool):
        return None, "{} says step {!r}, the directory name says {}".format(MANIFEST, manifest.get("step"), step)
    kind = manifest.get("kind")
    files = manifest.get("files")
    required = _required_files(manifest)
    if required is None or not isinstance(files, dict) or not all(name in files for name in required):
        return None, "{} has kind {!r} and does not list its required files".format(MANIFEST, kind)
    for name, size in files.items():
        if not _safe_relative(name) or isinstance(size, bool) or not isinstance(size, int):
            return None, "{} lists {!r} with size {!r}".format(MANIFEST, name, size)
        try:
            actual = os.stat(str(path / name)).st_size
        except OSError:
            return None, "{} is missing".format(name)
        if actual != size:
            return None, "{} has {} bytes, the manifest says {}".format(name, actual, size)
    return manifest, ""


def _required_files(manifest: Dict[str, Any]) -> Optional[List[str]]:
    """The files a manifest of its kind must list; None for an unknown kind or a shard manifest without ranks."""
    kind = manifest.get("kind")
    if kind in REQUIRED_FILE:
        return [REQUIRED_FILE[kind]]
    ranks = manifest.get("ranks")
    if kind != SHARDS or not isinstance(ranks, list) or not ranks:
        return None
    if not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks):
        return None
    return [name for rank in ranks for name in shard_files(rank)]


def _verified(checkpoint: Checkpoint, kind: str) -> Dict[str, Any]:
    manifest, problem = _inspect(checkpoint.path, checkpoint.step)
    if manifest is None:
        raise CheckpointError(
            "{} is not a complete checkpoint of step {}: {}. Fix: load checkpoint.latest(root) instead".format(
                checkpoint.path, checkpoint.step, problem
            )
        )
    if manifest["kind"] != kind:
        other = {DCP: "load_distributed()", TORCH_SAVE: "load()"}.get(manifest["kind"], "AsyncCheckpointer.resume()")
        raise CheckpointError(
            "{} was written with {}; read it with {}".format(checkpoint.path, manifest["kind"], other)
        )
    return manifest


def _safe_relative(name: Any) -> bool:
    if not isinstance(name, str) or not name or name.startswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def _data_files(directory: Path) -> Dict[str, int]:
    """{relative name: size in bytes} of every regular file under ``directory`` except the manifest."""
    files: Dict[str, int] = {}
    for parent, _, names in os.walk(str(directory)):
        for name in names:
            full = Path(parent) / name
            relative = full.relative_to(directory).as_posix()
            if relative != MANIFEST and full.is_file():
                files[relative] = full.stat().st_size
    return dict(sorted(files.items()))


def _fsync_file(path: Path) -> None:
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    """Make renames and new entries in ``path`` durable; a file system that cannot fsync a directory is skipped."""
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
            raise
    finally:
        os.close(fd)
