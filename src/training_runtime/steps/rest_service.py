"""Slurm's REST API on every controller, after slurmctld runs: slurmrestd's own account, the endpoint's certificate,
the service (slurmrestd on its UNIX socket behind the TLS endpoint, :mod:`training_runtime.rest.server`), the key
refresh's timer and a check that the API answers. The key and ``auth/jwt`` come first
(:mod:`training_runtime.steps.rest_api`)."""

from __future__ import annotations

import http.client
import ssl
from typing import List, Optional, Tuple

from training_runtime import services
from training_runtime.errors import StepFailed
from training_runtime.files import ensure_dir, read_text, write_file
from training_runtime.node import Node
from training_runtime.paths import BIN_DIR
from training_runtime.rest.config import CERTIFICATE, CONFIG_PATH, PRIVATE_KEY, REST_USER, TLS_DIR, RestServiceConfig
from training_runtime.rest.rotate import REFRESH_INTERVAL_S
from training_runtime.rest.server import PID_FILE, PROCESS_NAME, SERVER_HEADER
from training_runtime.retry import NotReady, RetryPolicy
from training_runtime.services import Daemon, daemon_record
from training_runtime.steps import Step
from training_runtime.steps.daemon import RunningDaemon, ServiceFiles
from training_runtime.steps.installed import program
from training_runtime.steps.rest_api import JwtKeyReload
from training_runtime.steps.slurm import ACCOUNTING_INCLUDE, conf_path, slurmdbd

PROGRAM = BIN_DIR + "/rest-api"
REFRESH_PROGRAM = BIN_DIR + "/rest-key-refresh"
UNIT = "hyperpod-cdk-rest-api.service"
REFRESH_SERVICE = "hyperpod-cdk-rest-key.service"
REFRESH_TIMER = "hyperpod-cdk-rest-key.timer"
UNIT_DIR = "/etc/systemd/system"
REST_DAEMON = Daemon(name=PROCESS_NAME, unit=UNIT, argv=(PROGRAM, "--daemon"), pid_file=PID_FILE)
MADE_FOR = TLS_DIR + "/made-for"
"""The host name and address the certificate names (a replaced node gets another address)."""
CERT_DAYS = 825
RENEW_BEFORE_S = 30 * 86400
READY_WAIT = RetryPolicy(attempts=None, base_s=0.5, cap_s=3.0, deadline_s=90.0)


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
