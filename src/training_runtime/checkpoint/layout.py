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
    if kind not in REQUIRED_FILE or not isinstance(files, dict) or REQUIRED_FILE[kind] not in files:
        return None, "{} has kind {!r} and does not list its required file".format(MANIFEST, kind)
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


def _verified(checkpoint: Checkpoint, kind: str) -> Dict[str, Any]:
    manifest, problem = _inspect(checkpoint.path, checkpoint.step)
    if manifest is None:
        raise CheckpointError(
            "{} is not a complete checkpoint of step {}: {}. Fix: load checkpoint.latest(root) instead".format(
                checkpoint.path, checkpoint.step, problem
            )
        )
    if manifest["kind"] != kind:
        other = "load_distributed()" if manifest["kind"] == DCP else "load()"
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
