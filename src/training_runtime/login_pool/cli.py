"""``python3 -m training_runtime login {drain,undrain,status,serve}`` on a login node of a login pool.

* ``drain`` (root only) writes the drain marker: the health endpoint answers 503 and the load balancer sends the node
  no new sessions; open sessions go on. ``undrain`` (root only) removes it. Both print one JSON line.
* ``status`` prints the node's health as the load balancer would see it (drained, sshd's answer), one JSON line;
  exit 0 when healthy, 1 when not.
* ``serve`` is the health endpoint (:mod:`.health`; the service ``hyperpod-cdk-login-health`` runs it), ``--daemon``
  in the background where the node has no systemd.

The operator runs ``drain``/``undrain`` from their machine with ``hyperpod-cdk login drain NODE`` (through SSM).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, List, Optional

from training_runtime.background import daemonize, name_process
from training_runtime.login_pool.health import DRAIN_DIR, DRAIN_MARKER, drained, health, safe_dir, server, sshd_answers
from training_runtime.login_pool.params import DEFAULT_HEALTH_PORT

FAILED = 2
UNHEALTHY = 1
PID_FILE = "/run/hyperpod-cdk-login-health.pid"
LOG_FILE = "/var/log/hyperpod-cdk/login-health.log"
PROCESS_NAME = "hpcdk-login-hc"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m training_runtime login", description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["drain", "undrain", "status", "serve"])
    p.add_argument("--port", type=int, default=DEFAULT_HEALTH_PORT, help="serve: the health port (%(default)s)")
    p.add_argument("--daemon", action="store_true", help="serve: in the background (nodes without systemd)")
    p.add_argument("--root", type=Path, default=Path("/"), help=argparse.SUPPRESS)
    return p


def set_drained(root: Path, on: bool, clock: Callable[[], float] = time.time) -> bool:
    """Write (``on``) or remove the drain marker; True when that changed anything. The directory is made root's,
    0700; one that is not (a link, a user's) is refused."""
    directory = root / DRAIN_DIR.lstrip("/")
    refused = safe_dir(directory)
    if refused is not None:
        raise PermissionError("{}; fix it (or remove it) as root and run again".format(refused))
    marker = root / DRAIN_MARKER.lstrip("/")
    if not on:
        try:
            marker.unlink()
        except FileNotFoundError:
            return False
        return True
    if drained(root) is not None:
        return False
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(str(directory), 0o700)
    temporary = directory / ".drained.tmp"
    descriptor = os.open(str(temporary), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(json.dumps({"since": round(clock(), 3)}) + "\n")
    os.replace(str(temporary), str(marker))
    return True


def main(argv: Optional[List[str]] = None, probe: Callable[[], Optional[str]] = sshd_answers) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.command in ("drain", "undrain"):
        if os.geteuid() != 0:
            sys.stderr.write("login {}: root only (run it with sudo)\n".format(args.command))
            return FAILED
        try:
            changed = set_drained(args.root, args.command == "drain")
        except OSError as error:
            sys.stderr.write("login {}: {}\n".format(args.command, error))
            return FAILED
        print(json.dumps({"drained": args.command == "drain", "changed": changed}, sort_keys=True))
        return 0
    if args.command == "status":
        code, reason = health(args.root, probe)
        print(json.dumps({"healthy": code == 200, "drained": drained(args.root) is not None, "reason": reason}))
        return 0 if code == 200 else UNHEALTHY
    if not 1 <= args.port <= 65535:
        sys.stderr.write("login serve: --port {} is not a TCP port\n".format(args.port))
        return FAILED
    httpd = server(args.port, args.root, probe)  # bound before the fork: a port in use fails here, visibly
    if args.daemon:
        daemonize(Path(PID_FILE), Path(LOG_FILE), PROCESS_NAME)
    else:
        name_process(PROCESS_NAME)
    httpd.serve_forever()
    return 0
