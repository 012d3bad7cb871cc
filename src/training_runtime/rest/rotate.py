"""Key rotation on the controller: ``rest refresh-key`` reads the secret's ``AWSCURRENT`` version and, when it differs
from the key file, installs it and has slurmctld and slurmdbd load it. Run by a systemd timer (every
:data:`REFRESH_INTERVAL_S`) and by hand after a rotation.

Why not JWKS: Slurm's JWKS support verifies RS256 tokens only (jwt.html: "Slurm can support RS256 tokens ... an
appropriate JWKS file must be downloaded"; "JWTs are only verified against RSA 256 bit keys"), and HS256 tokens take
"a single signing key" ("Slurm currently only supports a single signing key"). The key is HS256 (a Secrets Manager
secret, what the minting function signs with), so a rotation replaces the key file and the daemons read it again:

* slurmctld: ``scontrol reconfigure``. scontrol(1), 24.11: "Starting in 23.11, this command operates by creating new
  processes for the daemons, then passing control to the new processes when or if they start up successfully ...
  without interrupting running jobs". The new process loads its plugins, ``auth/jwt`` and its key file, afresh.
  slurmctld keeps its state (jobs, queue; it recovers its saved state and is handed its listening sockets), not its
  PID: daemonized, the new process is a grandchild of the old one.
* slurmdbd: restarted when the runtime runs it (its SIGHUP handler re-reads slurmdbd.conf but does not reload the
  authentication plugins in 24.11's ``reconfig()``). slurmctld queues accounting records while slurmdbd is away.

A token signed with the old key is refused from then on ("jwt_decode failure" in slurmctld's log). The key's value
never reaches a log, an argument list or an exception.
"""

from __future__ import annotations

import os
import pwd
import signal
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence

from training_runtime.aws_secrets import SecretsManager
from training_runtime.rest.config import RestServiceConfig
from training_runtime.rest.secret import client_for, fetch_key
from training_runtime.run import CommandError, Result, Runner

REFRESH_INTERVAL_S = 300
"""The timer's period: a rotated key is in use on the controller within five minutes (or at once by hand)."""
RECONFIGURE_DEADLINE_S = 120.0
UNCHANGED, ROTATED = "unchanged", "rotated"

Run = Callable[..., Result]


def write_key(path: str, data: bytes, owner: str, root: Path = Path("/")) -> bool:
    """``data`` at ``path`` (mode 0400, ``owner`` and its group; its directory 0700 likewise), replaced atomically.
    True when the content changed. jwt.html: "The key file should be owned by SlurmUser or root, with recommended
    permissions of 0400. The file must not be accessible by 'other'."""
    target = root / path.lstrip("/")
    entry = pwd.getpwnam(owner)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.chown(str(target.parent), entry.pw_uid, entry.pw_gid)
    os.chmod(str(target.parent), 0o700)
    try:
        if target.read_bytes() == data:
            info = target.stat()
            if (info.st_mode & 0o777, info.st_uid) == (0o400, entry.pw_uid):
                return False
    except FileNotFoundError:
        pass
    fd, temporary = tempfile.mkstemp(dir=str(target.parent), prefix="." + target.name + ".")
    try:
        os.fchmod(fd, 0o400)
        os.fchown(fd, entry.pw_uid, entry.pw_gid)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, str(target))
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return True


def reconfigure(
    scontrol: str,
    run: Run,
    sleep: Callable[[float], None] = time.sleep,
    deadline_s: float = RECONFIGURE_DEADLINE_S,
) -> None:
    """``scontrol reconfigure``, retried while slurmctld does not answer (up to ``deadline_s``)."""
    deadline = time.monotonic() + deadline_s
    while True:
        result = run([scontrol, "reconfigure"], check=False, timeout=60)
        if result.ok:
            return
        if time.monotonic() >= deadline:
            raise CommandError(
                result.argv,
                result.returncode,
                "{} (slurmctld still has the old key). Fix: check slurmctld's log, then run `scontrol reconfigure` on "
                "the controller".format((result.stderr or result.stdout).strip()),
            )
        sleep(2.0)


def restart_slurmdbd(
    record: Dict[str, Any], systemd: bool, run: Run, sleep: Callable[[float], None] = time.sleep
) -> None:
    """Restart the runtime's slurmdbd (``record``: :func:`training_runtime.services.daemon_record`): systemctl, or
    SIGTERM to its pid file's process and its start command again."""
    if systemd:
        run(["systemctl", "restart", str(record["unit"])], timeout=120)
        return
    pid_file = Path(str(record["pid_file"]))
    try:
        pid: Optional[int] = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        pid = None
    if pid is not None:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pid = None
    for _ in range(300):
        if pid is None or not Path("/proc/{}".format(pid)).exists():
            break
        sleep(0.1)
    argv: Sequence[str] = [str(a) for a in record["argv"]]
    run(list(argv), timeout=120)


def refresh(
    config: RestServiceConfig,
    client: Optional[SecretsManager] = None,
    run: Optional[Run] = None,
    root: Path = Path("/"),
) -> str:
    """Install the secret's current key if it changed and make the daemons load it; :data:`ROTATED` or
    :data:`UNCHANGED`. Raises :class:`~training_runtime.rest.secret.SecretError` or
    :class:`~training_runtime.run.CommandError` with the fix."""
    runner = run if run is not None else Runner().run
    secrets = client if client is not None else client_for(config.region, config.secretsmanager_url, config.imds_url)
    key = fetch_key(secrets, config.secret_arn)
    if not write_key(config.key_file, key, config.slurm_user, root):
        return UNCHANGED
    reconfigure(config.scontrol, runner)
    if config.slurmdbd is not None:
        restart_slurmdbd(config.slurmdbd, config.systemd, runner)
    return ROTATED
