"""A login node of a login pool (issue #41, part 4; ``hyperpod_cdk.login_pool`` in the parameters file): the pool's
SSH host keys from Secrets Manager, sshd running, and the health endpoint the load balancer checks.

* :class:`PoolHostKeys` reads the secret's ``AWSCURRENT`` value with the node's instance role. A host-key bundle
  (:mod:`training_runtime.login_pool.host_keys`) is installed as ``/etc/ssh/ssh_host_<type>_key`` (0600 root) and
  ``.pub`` (0644); anything else (the stack's placeholder) makes this node generate a bundle and write it with the
  token every node derives alike, so the first node's bundle wins and the others install it. Files are written only
  when they differ; sshd reloads only then (systemd's ``try-reload-or-restart``, or SIGHUP to the pid in sshd's pid
  file: sshd(8) "sshd rereads its configuration file when it receives a hangup signal, SIGHUP"). Keys are never on a
  command line or in a log.
* :class:`SshdRunning`, only where the node has no systemd (the local cluster, containers): HyperPod's AMI runs sshd
  itself (``ssh.service``), which the runtime leaves alone; here it is started as the AMI would.
* The health endpoint: :class:`LoginHealthFiles` (its program and, with systemd, its unit) and a
  :class:`~training_runtime.steps.daemon.RunningDaemon` keeping it up.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Callable, List, Optional, Sequence, Tuple

from training_runtime import services
from training_runtime.aws_secrets import SecretError, SecretsManager, endpoint_for
from training_runtime.errors import StepFailed
from training_runtime.files import file_matches, write_file
from training_runtime.log import log
from training_runtime.login_pool.cli import PID_FILE, PROCESS_NAME
from training_runtime.login_pool.host_keys import (
    KEY_TYPES,
    BundleError,
    Keys,
    client_request_token,
    dump_bundle,
    generate_keys,
    parse_bundle,
)
from training_runtime.login_pool.params import LoginPoolParams
from training_runtime.node import Node
from training_runtime.paths import BIN_DIR
from training_runtime.services import Daemon
from training_runtime.steps import Step
from training_runtime.steps.daemon import RunningDaemon, ServiceFiles
from training_runtime.steps.directory import SSHD_RUN_DIR, aws_credentials
from training_runtime.steps.installed import program

RESOURCE_EXISTS = "ResourceExistsException"
SSHD = Daemon(
    name="sshd",
    unit="ssh.service",
    argv=("/usr/sbin/sshd",),
    pid_file="/run/sshd.pid",
    run_dir=(SSHD_RUN_DIR, "root", 0o755),
)
"""Debian's sshd: its unit, its default ``PidFile`` (sshd_config(5): "The default is /run/sshd.pid"), its
privilege separation directory."""
HEALTH_PROGRAM = BIN_DIR + "/login-health"
POOL_PROGRAM = BIN_DIR + "/login-pool"
"""``python3 -m training_runtime login`` from the installed runtime: what ``hyperpod-cdk login drain`` runs, as
root."""
HEALTH_UNIT = "hyperpod-cdk-login-health.service"
HEALTH_UNIT_FILE = "/etc/systemd/system/" + HEALTH_UNIT
HEALTH = Daemon(name=PROCESS_NAME, unit=HEALTH_UNIT, argv=(HEALTH_PROGRAM, "--daemon"), pid_file=PID_FILE)

KeySource = Callable[[Node, LoginPoolParams, bool], Optional[Keys]]
"""(node, pool, write) -> the pool's keys (:func:`pool_keys`)."""


def host_key_files(keys: Keys) -> List[Tuple[str, str, int]]:
    """(path, content, mode) of every host key file sshd reads."""
    files = []
    for kind in KEY_TYPES:
        private, public = keys[kind]
        path = "/etc/ssh/ssh_host_{}_key".format(kind)
        files += [(path, private, 0o600), (path + ".pub", public, 0o644)]
    return files


def run_keygen(argv: Sequence[str]) -> None:
    """``ssh-keygen`` on this machine, its output discarded (it prints the fingerprint, not the key)."""
    subprocess.run(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120, check=True
    )


def secrets_client(node: Node, pool: LoginPoolParams) -> SecretsManager:
    emulation = node.params.emulation
    endpoint = endpoint_for(pool.region, emulation.secretsmanager_url if emulation is not None else None)
    return SecretsManager(endpoint, pool.region, aws_credentials(node))


def pool_keys(
    node: Node,
    pool: LoginPoolParams,
    write: bool = True,
    client: Optional[SecretsManager] = None,
    keygen: Callable[[Sequence[str]], None] = run_keygen,
) -> Optional[Keys]:
    """The pool's keys: the secret's bundle; where it holds none, None when not ``write`` (``plan``), else this node's
    new bundle once its write won (else the winner's)."""
    client = client or secrets_client(node, pool)
    arn = pool.host_keys_secret_arn
    fix = (
        "Fix: check that the secret exists in {}, that the login group's execution role may "
        "secretsmanager:GetSecretValue and PutSecretValue on it (hyperpod-cdk grants both), and that the node reaches "
        "Secrets Manager (NAT gateway or a VPC endpoint)".format(pool.region)
    )
    try:
        value, version = client.current(arn)
        keys = parse_bundle(value)
        if keys is not None or not write:
            if keys is not None and write:
                log("login_pool_host_keys", secret=arn, source="secret", version=version)
            return keys
        generated = generate_keys(keygen)
        token = client_request_token(arn, version)
        try:
            client.put_string(arn, dump_bundle(generated), token)
            log("login_pool_host_keys", secret=arn, source="generated here", version=token)
            return generated
        except SecretError as error:
            if error.code != RESOURCE_EXISTS:
                raise
        value, version = client.current(arn)  # another login node wrote first: its keys
        keys = parse_bundle(value)
    except SecretError as error:
        raise StepFailed("the login pool's host keys: {}. {}".format(error, fix)) from None
    except BundleError as error:
        raise StepFailed(
            "the login pool's host keys in {}: {}. Fix: put a placeholder (any value that is not a bundle) as the "
            "secret's value, and the next login node to boot writes a new bundle".format(arn, error)
        ) from None
    except (OSError, subprocess.SubprocessError) as error:
        raise StepFailed("the login pool's host keys: ssh-keygen failed: {}".format(error)) from None
    if keys is None:
        raise StepFailed(
            "the login pool's host keys: another node's write of {} was refused as existing, yet AWSCURRENT holds no "
            "bundle. Fix: check who else writes the secret".format(arn)
        )
    log("login_pool_host_keys", secret=arn, source="another login node", version=version)
    return keys


class PoolHostKeys(Step):
    """The pool's host keys in /etc/ssh (root 0600, .pub 0644), sshd reloaded when they changed."""

    name = "login-pool-host-keys"

    def __init__(self, pool: LoginPoolParams, keys: KeySource = pool_keys) -> None:
        self.pool = pool
        self.keys = keys
        self._files: Optional[List[Tuple[str, str, int]]] = None

    def files(self, node: Node, write: bool) -> Optional[List[Tuple[str, str, int]]]:
        """The files of the pool's keys; None: the secret holds no bundle yet (``write``: make one)."""
        if self._files is None:  # the secret is read once per run, written at most once
            keys = self.keys(node, self.pool, write)
            if keys is None:
                return None
            self._files = host_key_files(keys)
        return self._files

    def needed(self, node: Node) -> bool:
        files = self.files(node, write=False)
        return files is None or any(not file_matches(node, path, text, mode) for path, text, mode in files)

    def apply(self, node: Node) -> None:
        files = self.files(node, write=True)
        assert files is not None
        changed = False
        for path, text, mode in files:
            changed = write_file(node, path, text, mode=mode) or changed
        if changed:
            reload_sshd(node)

    def describe(self, node: Node) -> List[str]:
        where = self.pool.host_keys_secret_arn
        if self.files(node, write=False) is None:
            return ["generate the login pool's host keys ({}) and write them to {}".format(", ".join(KEY_TYPES), where)]
        return ["install the login pool's host keys ({}) from {}".format(", ".join(KEY_TYPES), where)]


def reload_sshd(node: Node) -> None:
    """sshd loads the new host keys; a node where it does not run yet is left to start it."""
    if node.has_systemd:
        node.run(["systemctl", "try-reload-or-restart", SSHD.unit], check=False, timeout=60)
        return
    number = services.pid(node, SSHD)
    if number is not None:
        os.kill(number, signal.SIGHUP)


class SshdRunning(RunningDaemon):
    """sshd started as HyperPod's AMI runs it (nodes without systemd only: with systemd it is the AMI's)."""

    def __init__(self) -> None:
        super().__init__(SSHD)
        self.name = "login-pool-sshd"

    def apply(self, node: Node) -> None:
        sshd = node.which("sshd", ["/usr/sbin"])
        if sshd is None:
            raise StepFailed("the login pool needs sshd (/usr/sbin/sshd). Fix: install openssh-server")
        super().apply(node)


def health_unit() -> str:
    return (
        "# Installed by hyperpod-cdk: the login pool's health endpoint (GET /health) for the load balancer.\n"
        "[Unit]\nDescription=hyperpod-cdk login pool health endpoint\nAfter=network-online.target ssh.service\n\n"
        "[Service]\nExecStart={}\nRestart=always\nRestartSec=5\n\n"
        "[Install]\nWantedBy=multi-user.target\n".format(HEALTH_PROGRAM)
    )


class LoginHealthFiles(ServiceFiles):
    """The health endpoint's program (its port in it), the drain command's and, with systemd, the endpoint's unit."""

    name = "login-pool-health"
    unit_file = HEALTH_UNIT_FILE

    def __init__(self, pool: LoginPoolParams) -> None:
        self.pool = pool

    def files(self, node: Node) -> List[Tuple[str, str, int]]:
        files = [
            (HEALTH_PROGRAM, program("login serve --port {}".format(self.pool.health_port)), 0o755),
            (POOL_PROGRAM, program("login"), 0o755),
        ]
        if node.has_systemd:
            files.append((HEALTH_UNIT_FILE, health_unit(), 0o644))
        return files


def login_pool_steps(node: Node) -> List[Step]:
    """On login nodes of a cluster with a login pool only."""
    pool = node.params.login_pool
    if pool is None or not node.is_login:
        return []
    config = [HEALTH_PROGRAM] + ([HEALTH_UNIT_FILE] if node.has_systemd else [])
    steps: List[Step] = [PoolHostKeys(pool)]
    if not node.has_systemd:
        steps.append(SshdRunning())
    return [*steps, LoginHealthFiles(pool), RunningDaemon(HEALTH, config)]
