"""The writer process: ``python -m training_runtime.checkpoint.writer <socket fd>``, one per trainer process.

It maps the staging buffer the trainer sends (read-only), and for each save request writes the shard through the
tiers (:func:`.tiers.execute`) and answers ``done`` or ``failed``. It never imports torch, so it starts in a
fraction of a second and shares no interpreter lock with the trainer.

A process, not a thread: the trainer's Python keeps its interpreter lock while it trains, and a crash of the writer
(or an out-of-memory kill) must not end the trainer. The reverse holds too: when the trainer dies, the writer
finishes the save it holds (the staged bytes stay mapped) and then exits, at the end of the socket. It ignores
SIGINT and SIGTERM for that reason (Slurm's SIGTERM to a job's processes is followed by SIGKILL after
``KillWait``; the trainer's SIGTERM handler can flush the save meanwhile).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import signal
import socket
import sys
import traceback
from typing import Callable, List, Optional

from training_runtime.checkpoint.jobs import SaveJob, receive, send
from training_runtime.checkpoint.tiers import execute, write_all


class Buffer:
    """The staging buffer as the writer maps it."""

    def __init__(self) -> None:
        self.mapping: Optional[mmap.mmap] = None

    def attach(self, fd: int, size: int) -> None:
        self.detach()
        try:
            self.mapping = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)

    def detach(self) -> None:
        if self.mapping is not None:
            self.mapping.close()
            self.mapping = None

    def writer(self, size: int) -> Callable[[int, Callable[[], None]], None]:
        mapping = self.mapping
        if mapping is None or len(mapping) < size:
            raise RuntimeError("the writer holds no staging buffer of {} bytes (protocol error)".format(size))

        def write(fd: int, halfway: Callable[[], None]) -> None:
            view = memoryview(mapping)[:size]
            try:
                write_all(fd, view, halfway)
            finally:
                view.release()

        return write


def serve(sock: socket.socket) -> int:
    """Answer the trainer's requests until it says ``exit`` or goes away."""
    buffer = Buffer()
    while True:
        received = receive(sock)
        if received is None:
            break
        message, payload, fd = received
        op = message.get("op")
        if op == "exit":
            break
        if op == "buffer":
            assert fd is not None
            buffer.attach(fd, int(message["size"]))
            continue
        if op == "save":
            _save(sock, buffer, SaveJob.from_message(message["job"]), payload)
    buffer.detach()
    return 0


def _save(sock: socket.socket, buffer: Buffer, job: SaveJob, index: bytes) -> None:
    reply = {"event": "done", "step": job.step, "save_id": job.save_id}
    try:
        execute(job, index, buffer.writer(job.size))
    except Exception as error:
        reply = dict(reply, event="failed", error="{}: {}".format(type(error).__name__, error))
        traceback.print_exc()
    with contextlib.suppress(OSError):  # the trainer is gone; the save itself is done (or failed) all the same
        send(sock, reply)


def main(argv: List[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(fileno=int(argv[0]))
    try:
        return serve(sock)
    finally:
        sock.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
