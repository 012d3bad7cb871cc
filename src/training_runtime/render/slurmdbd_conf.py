"""slurmdbd.conf: the accounting daemon on the controller and the MySQL/MariaDB database behind it.

The file holds the database password and nothing else does, so the caller writes it mode 0600, owner
``slurm_user`` (slurmdbd refuses to start otherwise). Problems are reported without echoing the password.

With ``jwt_key`` (Slurm's REST API on), slurmdbd also accepts JSON Web Tokens signed with that key
(:mod:`.jwt_keys`).

With ``ssl_ca`` (an external database), slurmdbd connects over TLS: ``StorageParameters=SSL_CA=<bundle>``.
slurmdbd.conf(5): "StorageParameters: Comma separated list of key-value pair parameters. Currently supported values
include options to establish a secure connection to the database: [...] SSL_CA: The path name of the Certificate
Authority (CA) certificate file." Slurm splits the value on ',' and '=' (``_set_mysql_ssl_opts`` in
``src/database/mysql_common.c``) and hands the pieces to ``mysql_ssl_set``, so the path may hold neither.
"""

from __future__ import annotations

import re
from typing import List, Optional

from training_runtime.hyperpod_facts import ACCOUNTING_DATABASE, SLURM_LOG_DIR, SLURMDBD_PID_FILE
from training_runtime.options import TCP_PORTS
from training_runtime.render.jwt_keys import KEY_PATH, jwt_lines
from training_runtime.render.slurm_checks import ADDRESS, NODE_NAME
from training_runtime.render.slurm_conf import RenderError
from training_runtime.users import USER_NAME

DATABASE_NAME = ACCOUNTING_DATABASE
"""The accounting database (``StorageLoc``) of every cluster: the runtime's slurmdbd and, when HyperPod runs
slurmdbd, the name the constructs give its ``AccountingDatabase`` (one history whoever runs slurmdbd)."""
DB_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
DB_USER = re.compile(r"^[A-Za-z0-9_.@-]{1,80}$")
_PASSWORD_FORBIDDEN = re.compile(r'[\s"\x00-\x1f\x7f]')
TLS_LINES = (
    "# TLS to the database, with the CA bundle that runtime.accounting.ca_bundle_url and _sha256 name.\n"
    "StorageParameters=SSL_CA={}\n"
)
SSL_PATH = re.compile(r"^/[A-Za-z0-9._/-]+\Z")
"""A StorageParameters file path: absolute, and none of the ',' '=' '#' or spaces Slurm's parsers split on."""


def escape_value(value: str) -> str:
    """``value`` as Slurm's parser reads it back: ``\\`` and ``#`` (a comment otherwise) are escaped."""
    return value.replace("\\", "\\\\").replace("#", "\\#")


def render_slurmdbd_conf(
    *,
    dbd_host: str,
    storage_host: str,
    storage_port: int,
    storage_user: str,
    storage_pass: str,
    storage_loc: str = DATABASE_NAME,
    log_dir: str = SLURM_LOG_DIR,
    slurm_user: str = "slurm",
    ssl_ca: Optional[str] = None,
    jwt_key: Optional[str] = None,
) -> str:
    """The complete slurmdbd.conf. Raises :class:`RenderError` listing every problem in the inputs."""
    problems: List[str] = []

    def bad(name: str, value: object, allowed: str) -> None:
        problems.append("{}: got {!r}; {}".format(name, value, allowed))

    if not isinstance(dbd_host, str) or not NODE_NAME.fullmatch(dbd_host):
        bad("dbd_host", dbd_host, "expected the controller's host name (SlurmctldHost's name)")
    if not isinstance(storage_host, str) or not ADDRESS.fullmatch(storage_host):
        bad("storage_host", storage_host, "expected a host name or IP address")
    if isinstance(storage_port, bool) or not isinstance(storage_port, int) or storage_port not in TCP_PORTS:
        bad("storage_port", storage_port, "expected a TCP port from {} to {}".format(TCP_PORTS[0], TCP_PORTS[-1]))
    if not isinstance(storage_user, str) or not DB_USER.fullmatch(storage_user):
        bad("storage_user", storage_user, "expected 1-80 letters, digits, '_', '.', '@' or '-'")
    if not isinstance(storage_pass, str) or not storage_pass or _PASSWORD_FORBIDDEN.search(storage_pass):
        problems.append(
            "storage_pass: must be a non-empty string without whitespace, control characters or '\"' "
            "(Slurm's config parser cannot represent them); the value is not shown"
        )
    if not isinstance(storage_loc, str) or not DB_NAME.fullmatch(storage_loc):
        bad("storage_loc", storage_loc, "expected a database name of 1-64 letters, digits and '_'")
    for name, value in (("log_dir", log_dir),):
        if not isinstance(value, str) or not value.startswith("/") or re.search(r"[\s#]", value) or value.endswith("/"):
            bad(name, value, "expected an absolute path without whitespace, '#' or a trailing '/'")
    if not isinstance(slurm_user, str) or not USER_NAME.fullmatch(slurm_user):
        bad("slurm_user", slurm_user, "expected a Linux user name")
    if ssl_ca is not None and (not isinstance(ssl_ca, str) or not SSL_PATH.match(ssl_ca)):
        bad("ssl_ca", ssl_ca, "expected an absolute path of letters, digits, '.', '_', '-' and '/'")
    if jwt_key is not None and (not isinstance(jwt_key, str) or not KEY_PATH.match(jwt_key)):
        bad("jwt_key", jwt_key, "expected an absolute path of letters, digits, '.', '_', '-' and '/'")
    if problems:
        raise RenderError("slurmdbd.conf", problems)
    return (
        "# slurmdbd.conf, generated by hyperpod-cdk (training_runtime.render.slurmdbd_conf).\n"
        "# Rewritten on the controller at every boot; edits made here are lost.\n"
        "# Holds the database password: keep it mode 0600, owned by {user} (slurmdbd checks).\n"
        "AuthType=auth/munge\n"
        "{jwt}"
        "DbdHost={dbd_host}\n"
        "SlurmUser={user}\n"
        "LogFile={log_dir}/slurmdbd.log\n"
        "PidFile={pid_file}\n"
        "StorageType=accounting_storage/mysql\n"
        "StorageHost={storage_host}\n"
        "StoragePort={storage_port}\n"
        "StorageUser={storage_user}\n"
        "StoragePass={storage_pass}\n"
        "StorageLoc={storage_loc}\n"
        "{tls}"
    ).format(
        user=slurm_user,
        dbd_host=dbd_host,
        log_dir=log_dir,
        pid_file=SLURMDBD_PID_FILE,
        storage_host=storage_host,
        storage_port=storage_port,
        storage_user=storage_user,
        storage_pass=escape_value(storage_pass),
        storage_loc=storage_loc,
        tls="" if ssl_ca is None else TLS_LINES.format(ssl_ca),
        jwt="" if jwt_key is None else jwt_lines(jwt_key, slurmdbd=True),
    )
