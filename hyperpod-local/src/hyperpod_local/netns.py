"""Entering one of the cluster's network namespaces from the host for a moment (``setns``), so a socket made there
stays there: the control plane listens on the cluster's bridge this way, and a test or benchmark on the host reaches
a node's address (the REST API's TLS endpoint) through the switch namespace.

``setns(2)`` moves the calling thread only; :func:`entered` moves it back when the block ends, whatever happens in it.
"""

from __future__ import annotations

import ctypes
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

CLONE_NEWNET = 0x40000000


def _setns(fd: int, what: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"setns into {what}: {os.strerror(ctypes.get_errno())}")


@contextmanager
def entered(netns: str) -> Iterator[None]:
    """This thread in the named network namespace ``netns`` (``/run/netns/<netns>``) for the block."""
    with open("/proc/thread-self/ns/net") as own, open(f"/run/netns/{netns}") as target:
        _setns(target.fileno(), netns)
        try:
            yield
        finally:
            _setns(own.fileno(), "the host's network namespace")


def bound_in(netns: str, host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` in ``netns``; this process stays where it is."""
    with entered(netns):
        return socket.create_server((host, port))
