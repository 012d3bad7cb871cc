"""The REST API's process on the controller: slurmrestd on a UNIX socket, and the TLS endpoint in front of it.

Slurm 24.11's slurmrestd speaks plain HTTP only: rest.html, "Only unencrypted and uncompressed HTTP communications
are supported", and "Any site wishing to expose Slurm REST API to the internet or outside of the cluster should at
the very least use a proxy to wrap all communications with TLS". So one process (:func:`serve`), started as root:

1. loads the endpoint's certificate and key (root only on disk) into a TLS context: TLS 1.2 or later, AEAD ciphers;
2. makes slurmrestd's socket directory (0700, the REST user) and drops to that unprivileged user for good;
3. runs slurmrestd as its child (``SLURM_JWT=daemon``, JWT authentication only, on the UNIX socket only), started
   again with a capped backoff whenever it exits;
4. accepts TLS on ``port`` and copies bytes between each TLS connection and a new connection to the socket. While
   slurmrestd is down a client gets ``503`` with ``Server: hyperpod-cdk-rest`` (:data:`UNAVAILABLE`).

Plain HTTP exists only on the UNIX socket: it cannot leave the controller. SIGTERM stops the child, then the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import grp
import json
import os
import pwd
import signal
import ssl
import sys
import time
from typing import Any, Dict, List, Optional

from training_runtime.rest.config import RestServiceConfig

PROCESS_NAME = "hyperpod-rest"
PID_FILE = "/run/hyperpod-cdk-rest.pid"
LOG_FILE = "/var/log/hyperpod-cdk/rest-api.log"
SERVER_HEADER = "hyperpod-cdk-rest"
_UNAVAILABLE_BODY = b'{"errors": [{"error": "slurmrestd is not running; try again"}]}'
UNAVAILABLE = (
    "HTTP/1.1 503 Service Unavailable\r\nServer: {}\r\nContent-Type: application/json\r\nConnection: close\r\n"
    "Content-Length: {}\r\n\r\n".format(SERVER_HEADER, len(_UNAVAILABLE_BODY)).encode()
    + _UNAVAILABLE_BODY
)
CHUNK = 65536
BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)
"""Waits before slurmrestd is started again after the 1st, 2nd... exit in a row; a run of a minute resets it."""
STEADY_S = 60.0
PR_SET_PDEATHSIG = 1
CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
"""TLS 1.2's suites (TLS 1.3's are fixed by OpenSSL and all AEAD): forward secrecy and AEAD only."""


def log(event: str, **fields: Any) -> None:
    """One JSON line on standard output (the service's log); never a token or key."""
    print(json.dumps(dict(event=event, at=round(time.time(), 3), **fields), sort_keys=True), flush=True)


def tls_context(certificate: str, private_key: str) -> ssl.SSLContext:
    """The endpoint's server context. TLS 1.2 is the floor, not 1.3: AWS says a target that "support[s] only TLS 1.3"
    fails HTTPS health checks (Elastic Load Balancing, Gateway Load Balancer target groups, "Health checks")."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(CIPHERS)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    context.load_cert_chain(certificate, private_key)
    return context


def drop_privileges(user: str) -> None:
    """Become ``user`` (its primary group, no supplementary groups) for the rest of the process's life."""
    entry = pwd.getpwnam(user)
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise SystemExit("rest serve: refusing to run as {} (uid {}, gid {})".format(user, entry.pw_uid, entry.pw_gid))
    if os.getuid() == 0:
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
    os.environ["HOME"] = "/"
    os.environ["USER"] = os.environ["LOGNAME"] = user


def prepare_socket_dir(config: RestServiceConfig) -> None:
    """The socket directory, owned by the REST user, 0700 (as root, before the drop)."""
    entry = pwd.getpwnam(config.user)
    os.makedirs(config.socket_dir, mode=0o700, exist_ok=True)
    os.chown(config.socket_dir, entry.pw_uid, grp.getgrgid(entry.pw_gid).gr_gid)
    os.chmod(config.socket_dir, 0o700)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the service process dies, so no slurmrestd outlives it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def child_env(config: RestServiceConfig) -> Dict[str, str]:
    """slurmrestd's environment: jwt.html, "Export the SLURM_JWT=daemon environment variable before starting the
    slurmrestd daemon to activate AuthAltTypes=auth/jwt as the primary authentication mechanism"."""
    return {
        "SLURM_JWT": "daemon",
        "SLURM_CONF": config.slurm_conf,
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/",
        "SLURMRESTD_JSON": "compact",
    }


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        try:
            if writer.can_write_eof():  # the UNIX socket: half-close, the answer may still come back
                writer.write_eof()
            else:  # TLS has no half-close: the other side ended, so does this connection
                writer.close()
        except (OSError, RuntimeError, ssl.SSLError):
            writer.close()


class Service:
    """One controller's REST endpoint: :meth:`run` until SIGTERM."""

    def __init__(self, config: RestServiceConfig, context: ssl.SSLContext, host: Optional[str] = None) -> None:
        self.config = config
        self.context = context
        self.host = host
        """Where to listen: None, every address of the controller (the load balancer's targets are its addresses)."""
        self.stopping: Optional[asyncio.Event] = None
        self.child: Optional[asyncio.subprocess.Process] = None

    async def handle(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_unix_connection(self.config.socket_path)
        except OSError:
            client_writer.write(UNAVAILABLE)
            with contextlib.suppress(ConnectionError, ssl.SSLError, OSError):
                await client_writer.drain()
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, upstream_writer), _pipe(upstream_reader, client_writer))
        for writer in (upstream_writer, client_writer):
            writer.close()

    async def supervise(self) -> None:
        """slurmrestd, started again after each exit until the service stops."""
        assert self.stopping is not None
        failures = 0
        while not self.stopping.is_set():
            with contextlib.suppress(FileNotFoundError):  # a dead slurmrestd's socket: the new one could not bind
                os.unlink(self.config.socket_path)
            started = time.monotonic()
            self.child = await asyncio.create_subprocess_exec(
                *self.config.slurmrestd_argv(), env=child_env(self.config), preexec_fn=_die_with_parent
            )
            log("slurmrestd-started", pid=self.child.pid, argv=self.config.slurmrestd_argv())
            code = await self.child.wait()
            if self.stopping.is_set():
                break
            failures = 1 if time.monotonic() - started >= STEADY_S else failures + 1
            delay = BACKOFF_S[min(failures, len(BACKOFF_S)) - 1]
            log("slurmrestd-exited", code=code, restart_in_s=delay)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), timeout=delay)

    async def run(self, signals: bool = True) -> None:
        """Serve until SIGTERM (``signals``; a test sets :attr:`stopping` instead), then stop slurmrestd."""
        self.stopping = asyncio.Event()  # made in the running loop (Python 3.8 binds an Event to a loop at creation)
        if signals:
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, self.stopping.set)
            loop.add_signal_handler(signal.SIGINT, self.stopping.set)
        server = await asyncio.start_server(self.handle, host=self.host, port=self.config.port, ssl=self.context)
        log("listening", port=self.config.port, socket=self.config.socket_path)
        supervisor = asyncio.ensure_future(self.supervise())
        await self.stopping.wait()
        server.close()
        child = self.child
        if child is not None and child.returncode is None:
            child.terminate()
            try:
                await asyncio.wait_for(child.wait(), timeout=10)
            except asyncio.TimeoutError:
                child.kill()
        await asyncio.gather(supervisor, return_exceptions=True)
        log("stopped")


def serve(config: RestServiceConfig, daemon: bool, argv: Optional[List[str]] = None) -> int:
    """Load the TLS context and the socket directory as root, (``daemon``: go to the background), drop to the REST
    user, run until SIGTERM."""
    from training_runtime.background import daemonize  # the job-time helper: no bootstrap machinery

    context = tls_context(config.certificate, config.private_key)
    prepare_socket_dir(config)
    if daemon:
        from pathlib import Path

        daemonize(Path(PID_FILE), Path(LOG_FILE), PROCESS_NAME)
    drop_privileges(config.user)
    try:
        asyncio.run(Service(config, context).run())
    except OSError as error:  # the port is taken, most often
        log("failed", error=str(error))
        sys.stderr.write("rest serve: {}\n".format(error))
        return 1
    return 0
