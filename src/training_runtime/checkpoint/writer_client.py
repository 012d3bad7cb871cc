"""The trainer's side of the writer process: start it, hand it buffers and saves, collect its answers."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional

from training_runtime.checkpoint.jobs import SaveJob, receive, send

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
"""The directory that holds ``training_runtime``: the writer imports the same copy as the trainer."""
STOP_TIMEOUT_S = 30.0


class WriterGone(Exception):
    """The writer process ended (or closed its socket); ``describe`` says how."""

    def __init__(self, describe: str) -> None:
        super().__init__(describe)
        self.describe = describe


class WriterProcess:
    """One running writer process and its socket."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH", "")) if p)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "training_runtime.checkpoint.writer", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()
        self.sock = ours
        self.buffer_generation = 0
        """The staging generation this writer has mapped (0: none)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    def attach(self, fd: int, size: int, generation: int) -> None:
        self._send({"op": "buffer", "size": size}, fd=fd)
        self.buffer_generation = generation

    def submit(self, job: SaveJob, index: bytes) -> None:
        self._send({"op": "save", "job": job.to_message()}, payload=index)

    def answer(self, timeout: Optional[float]) -> Optional[Dict[str, Any]]:
        """The writer's next answer, waiting up to ``timeout`` s (None: for ever); None when none came in time.
        Raises :class:`WriterGone` when the writer is gone."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.sock.fileno() < 0:
            raise WriterGone(self._ended("stopped"))
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            wait = 0.5 if left is None else min(left, 0.5)
            readable, _, _ = select.select([self.sock], [], [], wait)
            if readable:
                try:
                    received = receive(self.sock)
                except OSError:
                    received = None
                if received is None:
                    raise WriterGone(self._ended())
                return received[0]
            if self.process.poll() is not None:
                raise WriterGone(self._ended())
            if left is not None and left <= 0:
                return None

    def stop(self) -> None:
        """Ask the writer to exit once idle, and wait for it (killing it after :data:`STOP_TIMEOUT_S`)."""
        with contextlib.suppress(OSError):
            self._send({"op": "exit"})
        self.sock.close()
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _send(self, message: Dict[str, Any], payload: bytes = b"", fd: Optional[int] = None) -> None:
        try:
            send(self.sock, message, payload, fd)
        except OSError as error:
            raise WriterGone(self._ended(str(error))) from error

    def _ended(self, detail: str = "") -> str:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the checkpoint writer (pid {}) closed its socket{}".format(
                self.pid, ": " + detail if detail else ""
            )
        how = "was killed by signal {}".format(-code) if code < 0 else "exited with status {}".format(code)
        return "the checkpoint writer (pid {}) {}".format(self.pid, how)
