"""What the trainer asks its writer process to do, and how the two talk: torch-free (the writer never imports torch).

The trainer and the writer share a Unix stream socket. Each message is a 4-byte big-endian length and a JSON
object, followed by ``payload`` bytes when the object says so, and by one file descriptor (``SCM_RIGHTS``, on a
single marker byte) when it says ``"fd": true``: that is how the staging buffer's memfd reaches the writer.
"""

from __future__ import annotations

import array
import json
import os
import socket
import struct
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

STAGES = ("staging", "writing", "publishing", "copying", "publishing-shared")
"""Where a :class:`Breakpoints` can hold a save: ``staging`` (the trainer, halfway through the copy into the host
buffers), ``writing`` (the writer, halfway through the first tier's data file), ``publishing`` (the first tier's
manifest is durable, its rename not done), ``copying`` (halfway through the copy of the local tier's data file to the
shared tier), ``publishing-shared`` (with a local tier: the shared tier's manifest is durable, its rename not done)."""


@dataclass(frozen=True)
class Breakpoints:
    """Hold a save at named :data:`STAGES` (for crash tests, passed through the API, never read from the
    environment): at each, the process creates ``<directory>/<stage>.reached`` (holding its pid) and waits until
    ``<directory>/<stage>.go`` exists. A kill while it waits is a kill at that stage."""

    directory: str
    stages: Tuple[str, ...]

    def __post_init__(self) -> None:
        unknown = sorted(set(self.stages) - set(STAGES))
        if unknown:
            raise ValueError("unknown breakpoint stage(s) {}; the stages are {}".format(unknown, ", ".join(STAGES)))

    def reach(self, stage: str) -> None:
        if stage not in self.stages:
            return
        directory = Path(self.directory)
        (directory / (stage + ".reached")).write_text(str(os.getpid()))
        while not (directory / (stage + ".go")).exists():
            time.sleep(0.005)


def reach(breakpoints: Optional[Breakpoints], stage: str) -> None:
    if breakpoints is not None:
        breakpoints.reach(stage)


@dataclass(frozen=True)
class SaveJob:
    """One rank's part of one save."""

    step: int
    save_id: str
    """The same on every rank of one save (agreed when the save starts); orders saves of the same step."""
    rank: int
    world: int
    root: str
    local_root: Optional[str]
    keep: int
    keep_local: int
    size: int
    """Bytes of the shard's data file."""
    host: str
    torch_version: str
    shard_timeout: float
    """How long rank 0's writer waits for the other ranks' shards before it gives up on the save."""
    extra: Dict[str, Any] = field(default_factory=dict)
    breakpoints: Optional[Breakpoints] = None

    def to_message(self) -> Dict[str, Any]:
        message = asdict(self)
        message["breakpoints"] = None if self.breakpoints is None else asdict(self.breakpoints)
        return message

    @classmethod
    def from_message(cls, message: Dict[str, Any]) -> "SaveJob":
        values = dict(message)
        points = values.pop("breakpoints", None)
        fields = {name: values[name] for name in cls.__dataclass_fields__ if name in values}
        if points is not None:
            fields["breakpoints"] = Breakpoints(points["directory"], tuple(points["stages"]))
        return cls(**fields)


def send(sock: socket.socket, message: Dict[str, Any], payload: bytes = b"", fd: Optional[int] = None) -> None:
    """Send one message (with ``payload`` and ``fd`` when given)."""
    body = dict(message, payload=len(payload), fd=fd is not None)
    data = json.dumps(body).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)
    if payload:
        sock.sendall(payload)
    if fd is not None:
        sock.sendmsg([b"F"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])


def receive(sock: socket.socket) -> Optional[Tuple[Dict[str, Any], bytes, Optional[int]]]:
    """(message, payload, fd) of the next message; None at end of stream (the other side is gone)."""
    head = _exactly(sock, 4)
    if head is None:
        return None
    data = _exactly(sock, struct.unpack(">I", head)[0])
    if data is None:
        return None
    message = json.loads(data.decode())
    payload = b""
    if message.get("payload"):
        got = _exactly(sock, int(message["payload"]))
        if got is None:
            return None
        payload = got
    fd = None
    if message.get("fd"):
        fds = array.array("i")
        _, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_LEN(fds.itemsize))
        for level, kind, blob in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(blob[: len(blob) - len(blob) % fds.itemsize])
        if not fds:
            return None
        fd = fds[0]
    return message, payload, fd


def _exactly(sock: socket.socket, size: int) -> Optional[bytes]:
    parts: List[bytes] = []
    left = size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)
