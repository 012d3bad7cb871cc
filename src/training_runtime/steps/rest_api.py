"""Slurm's REST API on every controller (``hyperpod_cdk.rest_api``): the JWT key from Secrets Manager, ``auth/jwt`` for
slurmctld and slurmdbd, slurmrestd under its own account behind a TLS endpoint, and the key's refresh timer.

Key steps run before any Slurm daemon starts (slurmctld refuses to start when ``jwt_key=`` names a missing file:
``_check_key_permissions`` fatal()s "cannot stat" in 24.11's auth/jwt); service steps after slurmctld
(:func:`key_steps`, :func:`service_steps`; their places: :mod:`training_runtime.steps.catalog`). docs/rest-api.md, "On
the controller", says what each does and where AWS is silent.
"""

from __future__ import annotations

import http.client
import re
import ssl
from typing import Callable, List, Optional, Tuple

from training_runtime import services
from training_runtime.errors import StepFailed
from training_runtime.files import ensure_dir, file_matches, read_text, with_block, write_file
from training_runtime.node import GENERIC, Node
from training_runtime.paths import BIN_DIR, STATE_DIR
from training_runtime.render.jwt_keys import JWT_KEY_DIR, JWT_KEY_PATH, jwt_lines
from training_runtime.rest.config import CERTIFICATE, CONFIG_PATH, PRIVATE_KEY, REST_USER, TLS_DIR, RestServiceConfig
from training_runtime.rest.rotate import REFRESH_INTERVAL_S, reconfigure
from training_runtime.rest.secret import SecretError, client_for, fetch_key
from training_runtime.rest.server import PID_FILE, PROCESS_NAME, SERVER_HEADER
from training_runtime.retry import NotReady, RetryPolicy
from training_runtime.services import Daemon, daemon_record
from training_runtime.steps import Step
from training_runtime.steps.daemon import RunningDaemon, ServiceFiles
from training_runtime.steps.installed import program
from training_runtime.steps.slurm import (
    ACCOUNTING_INCLUDE,
    REST_BLOCK,
    SLURM_USER,
    conf_path,
    includes_accounting,
    slurmdbd,
)

PROGRAM = BIN_DIR + "/rest-api"
REFRESH_PROGRAM = BIN_DIR + "/rest-key-refresh"
UNIT = "hyperpod-cdk-rest-api.service"
REFRESH_SERVICE = "hyperpod-cdk-rest-key.service"
REFRESH_TIMER = "hyperpod-cdk-rest-key.timer"
UNIT_DIR = "/etc/systemd/system"
REST_DAEMON = Daemon(name=PROCESS_NAME, unit=UNIT, argv=(PROGRAM, "--daemon"), pid_file=PID_FILE)
RELOAD_MARKER = STATE_DIR + "/rest-api-key.reload"
"""Written when the key file was replaced while Slurm may hold the old key; :class:`JwtKeyReload` removes it."""
MADE_FOR = TLS_DIR + "/made-for"
"""The host name and address the certificate names (a replaced node gets another address)."""
CERT_DAYS = 825
RENEW_BEFORE_S = 30 * 86400
AUTH_KEYS = re.compile(r"^[ \t]*AuthAlt(Types|Parameters)[ \t]*=", re.IGNORECASE | re.MULTILINE)
READY_WAIT = RetryPolicy(attempts=None, base_s=0.5, cap_s=3.0, deadline_s=90.0)


# --- the key ---------------------------------------------------------------------------------------------
class JwtKey(Step):
    """The key file (:data:`~training_runtime.render.jwt_keys.JWT_KEY_PATH`, 0400 SlurmUser, its directory 0700) holds
    the secret's ``AWSCURRENT`` value. Read once per run (``plan`` reads it too: it names no value)."""

    name = "rest-api-key"

    def __init__(self, read: Optional[Callable[[Node], bytes]] = None) -> None:
        self.read = read if read is not None else read_key
        self._key: Optional[bytes] = None

    def _fetch(self, node: Node) -> bytes:
        if self._key is None:
            try:
                self._key = self.read(node)
            except SecretError as error:
                raise StepFailed(str(error)) from None
        return self._key

    def needed(self, node: Node) -> bool:
        try:
            key = self._fetch(node)
        except StepFailed:
            return True  # apply says why
        return not file_matches(node, JWT_KEY_PATH, key, 0o400, SLURM_USER) or not _key_dir_ok(node)

    def apply(self, node: Node) -> None:
        key = self._fetch(node)
        replaced = node.path(JWT_KEY_PATH).exists()
        ensure_dir(node, JWT_KEY_DIR, mode=0o700, owner=SLURM_USER)
        if write_file(node, JWT_KEY_PATH, key, mode=0o400, owner=SLURM_USER) and replaced:
            write_file(node, RELOAD_MARKER, "the key changed while Slurm may hold the old one\n", mode=0o600)

    def describe(self, node: Node) -> List[str]:
        rest = node.params.rest_api
        assert rest is not None
        return ["write {} (0400 {}) from secret {} (AWSCURRENT)".format(JWT_KEY_PATH, SLURM_USER, rest.key_secret_arn)]


def read_key(node: Node) -> bytes:
    """The secret's current key, read with the instance role (the emulation's endpoints on the local cluster)."""
    rest = node.params.rest_api
    assert rest is not None
    emulation = node.params.emulation
    client = client_for(
        rest.region,
        emulation.secretsmanager_url if emulation is not None else None,
        emulation.imds_url if emulation is not None else None,
    )
    return fetch_key(client, rest.key_secret_arn)


def _key_dir_ok(node: Node) -> bool:
    try:
        info = node.path(JWT_KEY_DIR).stat()
    except FileNotFoundError:
        return False
    return (info.st_mode & 0o7777) == 0o700 and info.st_uid == node.host.ids(SLURM_USER, None)[0]


class JwtKeyReload(Step):
    """After a bootstrap replaced the key (a rotation, seen by a re-run): what ``rest refresh-key`` does
    (:mod:`training_runtime.rest.rotate`): ``scontrol reconfigure``, so slurmctld loads it without a restart, and
    the runtime's slurmdbd restarted (it reads the key at start only)."""

    name = "rest-api-key-reload"

    def __init__(self, slurmdbd_ours: bool) -> None:
        self.slurmdbd_ours = slurmdbd_ours

    def needed(self, node: Node) -> bool:
        return node.path(RELOAD_MARKER).exists()

    def apply(self, node: Node) -> None:
        reconfigure(node.slurm.command("scontrol"), node.run)
        if self.slurmdbd_ours:
            services.restart(node, slurmdbd(node))
        node.path(RELOAD_MARKER).unlink()

    def describe(self, node: Node) -> List[str]:
        more = ", restart slurmdbd" if self.slurmdbd_ours else ""
        return ["scontrol reconfigure: slurmctld loads the new JWT key (running jobs go on){}".format(more)]


# --- auth/jwt in HyperPod's slurm.conf --------------------------------------------------------------------
def auth_conflict(node: Node) -> Optional[str]:
    """Why the runtime cannot add the ``auth/jwt`` keys to HyperPod's configuration (None: it can)."""
    slurm_conf = read_text(node, conf_path(node, "slurm.conf")) or ""
    include = conf_path(node, ACCOUNTING_INCLUDE)
    if not includes_accounting(slurm_conf):
        return "{} does not include {}, where the runtime adds its keys".format(conf_path(node, "slurm.conf"), include)
    ours = with_block(read_text(node, include) or "", REST_BLOCK, "")
    for path, text in ((conf_path(node, "slurm.conf"), slurm_conf), (include, ours)):
        if AUTH_KEYS.search(text):
            return "{} already sets AuthAltTypes or AuthAltParameters".format(path)
    return None


class SlurmAuthInclude(Step):
    """HyperPod platform: the ``auth/jwt`` keys in their block of ``accounting.conf``, the file HyperPod's slurm.conf
    includes and its agent keeps when it rewrites slurm.conf (the runtime's accounting keys and the scaler's
    ``JobSubmitPlugins`` live there too). When the runtime writes accounting.conf itself, its accounting step already
    put the block there (:func:`~training_runtime.steps.slurm.with_rest_block`) and this step finds nothing to do."""

    name = "rest-api-slurm-auth"

    def _wanted(self, node: Node) -> str:
        current = read_text(node, conf_path(node, ACCOUNTING_INCLUDE)) or ""
        return with_block(current, REST_BLOCK, jwt_lines(JWT_KEY_PATH).rstrip("\n"))

    def needed(self, node: Node) -> bool:
        if auth_conflict(node) is not None:
            return True  # apply says why
        return read_text(node, conf_path(node, ACCOUNTING_INCLUDE)) != self._wanted(node)

    def apply(self, node: Node) -> None:
        conflict = auth_conflict(node)
        if conflict is not None:
            raise StepFailed(
                "rest_api is on, but {}. AWS documents nothing of HyperPod's own AuthAlt settings; the runtime "
                'replaces none. Fix: remove them, or turn rest_api off (docs/rest-api.md, "On the '
                'controller")'.format(conflict)
            )
        write_file(node, conf_path(node, ACCOUNTING_INCLUDE), self._wanted(node))

    def describe(self, node: Node) -> List[str]:
        return ["write AuthAltTypes=auth/jwt into {}".format(conf_path(node, ACCOUNTING_INCLUDE))]


# --- slurmrestd's account, the certificate, the service ------------------------------------------------------
def _account(node: Node, name: str) -> Optional[List[str]]:
    for line in (read_text(node, "/etc/passwd") or "").splitlines():
        fields = line.split(":")
        if len(fields) >= 7 and fields[0] == name:
            return fields
    return None


class RestUser(Step):
    """slurmrestd's own system account and group (no home, no shell)."""

    name = "rest-api-user"

    def needed(self, node: Node) -> bool:
        return _account(node, REST_USER) is None

    def apply(self, node: Node) -> None:
        node.run(
            [
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                REST_USER,
            ]
        )

    def describe(self, node: Node) -> List[str]:
        return ["useradd --system {} (slurmrestd's own account)".format(REST_USER)]

    def left_alone(self, node: Node) -> List[str]:
        account = _account(node, REST_USER)
        if account is not None and (account[2] == "0" or account[3] == "0"):
            return ["account {} has uid or gid 0: slurmrestd refuses to run as root".format(REST_USER)]
        return []


def made_for(node: Node) -> str:
    return "{} {}\n".format(node.hostname, node.instance.address)


class RestCertificate(Step):
    """The endpoint's self-signed certificate (ECDSA P-256, the node's host name and address), made with ``openssl``
    on the controller; the key never leaves it. The load balancer in front "does not validate these certificates"
    (Elastic Load Balancing, Network Load Balancer target groups), so none is issued by a CA."""

    name = "rest-api-certificate"

    def _current(self, node: Node) -> bool:
        if read_text(node, MADE_FOR) != made_for(node):
            return False
        if not node.path(CERTIFICATE).is_file() or not node.path(PRIVATE_KEY).is_file():
            return False
        fresh = node.run(
            ["openssl", "x509", "-noout", "-checkend", str(RENEW_BEFORE_S), "-in", str(node.path(CERTIFICATE))],
            check=False,
            timeout=30,
        )
        return fresh.ok

    def needed(self, node: Node) -> bool:
        return not self._current(node)

    def apply(self, node: Node) -> None:
        ensure_dir(node, TLS_DIR, mode=0o700)
        key, cert = PRIVATE_KEY + ".new", CERTIFICATE + ".new"
        for path in (key, cert):
            node.path(path).unlink(missing_ok=True)
        node.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                str(node.path(key)),
                "-out",
                str(node.path(cert)),
                "-days",
                str(CERT_DAYS),
                "-subj",
                "/CN=" + node.hostname,
                "-addext",
                "subjectAltName=IP:{},DNS:{}".format(node.instance.address, node.hostname),
                "-addext",
                "extendedKeyUsage=serverAuth",
            ],
            timeout=60,
        )
        node.path(key).chmod(0o600)
        node.path(key).replace(node.path(PRIVATE_KEY))
        node.path(cert).chmod(0o644)
        node.path(cert).replace(node.path(CERTIFICATE))
        write_file(node, MADE_FOR, made_for(node), mode=0o644)

    def describe(self, node: Node) -> List[str]:
        return ["openssl req -x509: {} for {}".format(CERTIFICATE, made_for(node).strip())]


def openapi_plugins(node: Node) -> Tuple[str, ...]:
    """``openapi/slurmdbd`` too where slurm.conf has slurmdbd accounting (the runtime's, HyperPod's or the AMI's)."""
    text = (read_text(node, conf_path(node, "slurm.conf")) or "") + (
        read_text(node, conf_path(node, ACCOUNTING_INCLUDE)) or ""
    )
    accounting = node.options.accounting.enabled or "accounting_storage/slurmdbd" in text
    return ("openapi/slurmctld", "openapi/slurmdbd") if accounting else ("openapi/slurmctld",)


def service_config(node: Node, slurmdbd_ours: bool) -> RestServiceConfig:
    rest = node.params.rest_api
    assert rest is not None
    emulation = node.params.emulation
    return RestServiceConfig(
        port=rest.port,
        slurmrestd=node.slurm.command("slurmrestd", daemon=True),
        slurm_conf=conf_path(node, "slurm.conf"),
        openapi_plugins=openapi_plugins(node),
        secret_arn=rest.key_secret_arn,
        region=rest.region,
        scontrol=node.slurm.command("scontrol"),
        secretsmanager_url=emulation.secretsmanager_url if emulation is not None else None,
        imds_url=emulation.imds_url if emulation is not None else None,
        slurmdbd=daemon_record(slurmdbd(node)) if slurmdbd_ours else None,
        systemd=node.has_systemd,
    )


def service_unit() -> str:
    return (
        "# Installed by hyperpod-cdk: Slurm's REST API (slurmrestd on a UNIX socket, TLS on the rest_api port).\n"
        "[Unit]\nDescription=hyperpod-cdk Slurm REST API\nAfter=network-online.target slurmctld.service\n\n"
        "[Service]\nExecStart={}\nRestart=always\nRestartSec=5\nNoNewPrivileges=yes\nPrivateTmp=yes\n\n"
        "[Install]\nWantedBy=multi-user.target\n".format(PROGRAM)
    )


def refresh_units() -> List[Tuple[str, str]]:
    service = (
        "# Installed by hyperpod-cdk: installs the REST API's key when its secret was rotated.\n"
        "[Unit]\nDescription=hyperpod-cdk REST API key refresh\nAfter=network-online.target slurmctld.service\n\n"
        "[Service]\nType=oneshot\nExecStart={}\n".format(REFRESH_PROGRAM)
    )
    timer = (
        "[Unit]\nDescription=hyperpod-cdk REST API key refresh, every {interval} s\n\n"
        "[Timer]\nOnBootSec={interval}s\nOnUnitActiveSec={interval}s\nRandomizedDelaySec=30s\n\n"
        "[Install]\nWantedBy=timers.target\n".format(interval=REFRESH_INTERVAL_S)
    )
    return [(REFRESH_SERVICE, service), (REFRESH_TIMER, timer)]


class RestServiceFiles(ServiceFiles):
    """The service's settings (:data:`~training_runtime.rest.config.CONFIG_PATH`), its two programs and, with
    systemd, its unit and the key refresh's service and timer."""

    name = "rest-api-service"
    unit_file = UNIT_DIR + "/" + UNIT

    def __init__(self, slurmdbd_ours: bool) -> None:
        self.slurmdbd_ours = slurmdbd_ours

    def files(self, node: Node) -> List[Tuple[str, str, int]]:
        files = [
            (CONFIG_PATH, service_config(node, self.slurmdbd_ours).dumps(), 0o600),
            (PROGRAM, program("rest serve"), 0o755),
            (REFRESH_PROGRAM, program("rest refresh-key"), 0o755),
        ]
        if node.has_systemd:
            files.append((self.unit_file, service_unit(), 0o644))
            files += [(UNIT_DIR + "/" + name, text, 0o644) for name, text in refresh_units()]
        return files


class RefreshTimer(Step):
    """With systemd: the key refresh runs every :data:`~training_runtime.rest.rotate.REFRESH_INTERVAL_S`. Without
    (the local cluster) there is no timer: ``rest-key-refresh`` is run by hand (docs/rest-api.md, "Key rotation")."""

    name = "rest-api-key-timer"

    def needed(self, node: Node) -> bool:
        return node.has_systemd and not (
            services.unit_enabled(node, REFRESH_TIMER) and services.unit_active(node, REFRESH_TIMER)
        )

    def apply(self, node: Node) -> None:
        services.start_unit(node, REFRESH_TIMER)

    def describe(self, node: Node) -> List[str]:
        return ["systemctl enable --now {} (every {} s)".format(REFRESH_TIMER, REFRESH_INTERVAL_S)]


def probe(node: Node, port: int) -> Optional[str]:
    """None when slurmrestd answers through the TLS endpoint on this node; else what went wrong."""
    context = ssl.create_default_context(cafile=str(node.path(CERTIFICATE)))
    context.check_hostname = False  # 127.0.0.1 is not in the certificate; the certificate itself is checked
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
    try:
        connection.request("GET", "/openapi/v3")
        response = connection.getresponse()
        response.read()
    except (OSError, ssl.SSLError, http.client.HTTPException) as error:
        return str(error)
    finally:
        connection.close()
    if response.getheader("Server") == SERVER_HEADER:
        return "slurmrestd is not running behind the endpoint ({} {})".format(response.status, response.reason)
    return None


class RestApiReady(Step):
    """slurmrestd answers through the TLS endpoint (any answer of its own, ``401`` included); waits up to 90 s."""

    name = "rest-api-ready"

    def needed(self, node: Node) -> bool:
        rest = node.params.rest_api
        assert rest is not None
        return probe(node, rest.port) is not None

    def apply(self, node: Node) -> None:
        rest = node.params.rest_api
        assert rest is not None

        def answered() -> None:
            problem = probe(node, rest.port)
            if problem is not None:
                raise NotReady(problem)

        try:
            READY_WAIT.call(answered, what="the REST API")
        except NotReady as error:
            raise StepFailed(
                "the REST API on port {} did not answer within {:.0f} s: {}. Fix: read /var/log/hyperpod-cdk/"
                "rest-api.log (slurmrestd's own messages are there) and slurmctld's log".format(
                    rest.port, READY_WAIT.deadline_s, error
                )
            ) from None


def key_steps(node: Node) -> List[Step]:
    """Before the Slurm daemons start: the key (and, on HyperPod, the ``auth/jwt`` keys in accounting.conf)."""
    if node.params.rest_api is None or not node.is_controller:
        return []
    return [JwtKey()] + ([] if node.platform == GENERIC else [SlurmAuthInclude()])


def service_steps(node: Node, slurmdbd_ours: bool) -> List[Step]:
    """After slurmctld: a rotated key loaded, slurmrestd's account and certificate, the service, its timer."""
    if node.params.rest_api is None or not node.is_controller:
        return []
    watched = [CONFIG_PATH, PROGRAM, CERTIFICATE, PRIVATE_KEY]
    if node.has_systemd:
        watched.append(RestServiceFiles.unit_file)
    return [
        JwtKeyReload(slurmdbd_ours),
        RestUser(),
        RestCertificate(),
        RestServiceFiles(slurmdbd_ours),
        RunningDaemon(REST_DAEMON, watched),
        RefreshTimer(),
        RestApiReady(),
    ]
