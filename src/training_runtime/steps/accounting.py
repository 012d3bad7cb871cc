"""Slurm accounting on the controller: the local MariaDB (or an external database's password from Secrets
Manager), slurmdbd's configuration, and the cluster's registration in the accounting database."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from typing import List, Optional

from training_runtime import services
from training_runtime.apt import download
from training_runtime.errors import StepFailed
from training_runtime.files import ensure_dir, file_matches, read_text, write_file
from training_runtime.node import HYPERPOD, Node
from training_runtime.paths import (
    DB_SOCKET,
    MARIADBD_ARGV,
    MARIADBD_PID_FILE,
    MARIADBD_RUN_DIR,
    SLURMCTLD_STATE_DIR,
    STATE_DIR,
)
from training_runtime.render.jwt_keys import JWT_KEY_PATH
from training_runtime.render.slurmdbd_conf import DATABASE_NAME, render_slurmdbd_conf
from training_runtime.retry import NotReady
from training_runtime.run import CommandError
from training_runtime.services import Daemon
from training_runtime.steps import Step
from training_runtime.steps.slurm import SLURM_USER, conf_path, slurm_cluster_name

DB_PASSWORD_FILE = STATE_DIR + "/secrets/slurmdbd-password"
CA_BUNDLE = "accounting-ca-bundle.pem"
"""The external database's CA bundle, next to slurmdbd.conf (its ``StorageParameters=SSL_CA``)."""
CA_BUNDLE_DOWNLOAD = STATE_DIR + "/downloads/" + CA_BUNDLE
"""Where the bundle lands before its sha256 is checked (root-only state directory); never read by slurmdbd."""
DEFAULT_STATE_SAVE_LOCATION = SLURMCTLD_STATE_DIR
"""Slurm's default StateSaveLocation, where a slurm.conf names none."""
DB_NAME = DATABASE_NAME
DB_SERVER_CONF = "/etc/mysql/mariadb.conf.d/90-hyperpod-cdk-slurmdbd.cnf"
"""Read by the Debian and Ubuntu MariaDB server at start (``/etc/mysql/mariadb.cnf`` includes the directory),
under systemd and without it."""
DB_SERVER_SETTINGS = (
    "# Written by hyperpod-cdk's node runtime (training_runtime.steps.accounting): the local MariaDB as slurmdbd\n"
    "# needs it. Rewritten at every boot; edits made here are lost.\n"
    "[mysqld]\n"
    '# MariaDB 11.6.2 and later turn snapshot isolation on by default. slurmdbd 26.05 logs at start that it "is\n'
    "# not supported by Slurm and will cause slurmdbd to fatal when a write conflicts with a concurrent\n"
    '# transaction. Set innodb_snapshot_isolation=OFF" (24.11 does not check). loose-: a server without the\n'
    "# variable (MariaDB before 10.6.18) starts anyway.\n"
    "loose-innodb_snapshot_isolation = OFF\n"
)
"""The server settings slurmdbd needs (docs/node-runtime.md, step ``accounting-database``; found on Slurm's next
major, docs/local-cluster.md)."""


MARIADB = Daemon(
    name="mariadbd", unit="mariadb", argv=MARIADBD_ARGV, pid_file=MARIADBD_PID_FILE, run_dir=MARIADBD_RUN_DIR
)


class LocalDatabase(Step):
    """MariaDB on the controller with the accounting database and its user; the password is generated on
    the node, kept in a root-only file and passed to clients on stdin, never on a command line."""

    name = "accounting-database"

    def _initialised(self, node: Node) -> bool:
        return node.path("/var/lib/mysql/mysql").is_dir()

    def _grant_marker(self) -> str:
        return STATE_DIR + "/accounting-database.done"

    def needed(self, node: Node) -> bool:
        return (
            not file_matches(node, DB_SERVER_CONF, DB_SERVER_SETTINGS)
            or not self._initialised(node)
            or not services.is_running(node, MARIADB)
            or not node.path(DB_PASSWORD_FILE).exists()
            or not node.path(self._grant_marker()).exists()
        )

    def apply(self, node: Node) -> None:
        settings_changed = write_file(node, DB_SERVER_CONF, DB_SERVER_SETTINGS)
        if not self._initialised(node):
            ensure_dir(node, "/var/log/mysql", mode=0o750, owner="mysql", group="adm")
            node.run(["mariadb-install-db", "--user=mysql", "--datadir=/var/lib/mysql", "--skip-test-db"], timeout=300)
        if not services.is_running(node, MARIADB):
            services.start(node, MARIADB)
        elif settings_changed:  # a server started before the settings were written: it reads them at start
            services.restart(node, MARIADB)

        def ping() -> None:
            if not node.run(["mariadb-admin", "--socket=" + DB_SOCKET, "ping"], check=False, timeout=30).ok:
                raise NotReady("MariaDB is not answering yet")

        node.retry.call(ping, what="MariaDB")
        password = database_password(node)
        statements = (
            "CREATE DATABASE IF NOT EXISTS {db};\n"
            "CREATE USER IF NOT EXISTS '{user}'@'localhost' IDENTIFIED BY '{pw}';\n"
            "ALTER USER '{user}'@'localhost' IDENTIFIED BY '{pw}';\n"
            "GRANT ALL ON {db}.* TO '{user}'@'localhost';\n"
        ).format(db=DB_NAME, user=node.options.accounting.user, pw=password)
        node.run(["mariadb", "--socket=" + DB_SOCKET], input=statements, timeout=60)
        write_file(node, self._grant_marker(), "ok\n", mode=0o600)

    def describe(self, node: Node) -> List[str]:
        return [
            "write {} (innodb_snapshot_isolation off, as slurmdbd needs)".format(DB_SERVER_CONF),
            "initialise MariaDB in /var/lib/mysql",
            "start MariaDB on 127.0.0.1",
            "create {} and its user (password generated on the node)".format(DB_NAME),
        ]


def database_password(node: Node) -> str:
    """The local database's password: generated once, stored root-only on the controller."""
    target = node.path(DB_PASSWORD_FILE)
    if target.exists():
        return target.read_text().strip()
    ensure_dir(node, STATE_DIR + "/secrets", mode=0o700)
    password = secrets.token_urlsafe(24)
    write_file(node, DB_PASSWORD_FILE, password + "\n", mode=0o600)
    return password


def external_password(node: Node) -> str:
    """Reads the external database's password from Secrets Manager (AWS CLI on the node; the execution
    role grants read on that one secret). The value never reaches a log."""
    arn = node.options.accounting.password_secret_arn or ""
    region = arn.split(":")[3] if arn.count(":") >= 6 else ""
    result = node.retry.call(
        lambda: node.run(
            [
                "aws",
                "secretsmanager",
                "get-secret-value",
                "--secret-id",
                arn,
                "--region",
                region,
                "--query",
                "SecretString",
                "--output",
                "text",
            ],
            secret_output=True,
            timeout=60,
        ),
        what="read the accounting database secret",
        retry_on=(CommandError,),
    )
    value = result.stdout.strip()
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    if isinstance(parsed, dict) and isinstance(parsed.get("password"), str):
        return str(parsed["password"])
    raise StepFailed(
        "secret {} is JSON without a 'password' string; store the password or {{\"password\": ...}}".format(arn)
    )


def ca_bundle_path(node: Node) -> Optional[str]:
    """slurmdbd.conf's ``SSL_CA`` for an external database; None for the local one (reached over its socket)."""
    return conf_path(node, CA_BUNDLE) if node.options.accounting.database == "external" else None


def _expected_sha256(node: Node) -> str:
    expected = node.options.accounting.ca_bundle_sha256
    if not expected:
        raise StepFailed(
            "runtime.accounting.ca_bundle_sha256 is not set, so the CA bundle for the external database cannot be "
            "checked and is not downloaded (slurmdbd connects over TLS only with a checked bundle). Fix: download "
            "{} yourself, check it, and set ca_bundle_sha256 to `sha256sum`'s first field".format(
                node.options.accounting.ca_bundle_url
            )
        )
    return expected


def ca_bundle_current(node: Node) -> bool:
    """The bundle next to slurmdbd.conf has the sha256 the config names."""
    path = ca_bundle_path(node)
    expected = node.options.accounting.ca_bundle_sha256
    if path is None or not expected:
        return path is None
    data = node.path(path).read_bytes() if node.path(path).is_file() else None
    return data is not None and hashlib.sha256(data).hexdigest() == expected


def fetch_ca_bundle(node: Node) -> None:
    """Downloads the CA bundle (https only), checks its sha256 and only then puts it where slurmdbd reads it; a
    download with another sum is deleted and refused."""
    path = ca_bundle_path(node)
    if path is None or ca_bundle_current(node):
        return
    expected = _expected_sha256(node)
    url = node.options.accounting.ca_bundle_url
    staged = node.path(CA_BUNDLE_DOWNLOAD)
    ensure_dir(node, STATE_DIR + "/downloads", mode=0o700)
    staged.unlink(missing_ok=True)
    download(node, url, str(staged))
    data = staged.read_bytes() if staged.is_file() else b""
    staged.unlink(missing_ok=True)
    got = hashlib.sha256(data).hexdigest() if data else "(no file)"
    if got != expected:
        raise StepFailed(
            "{}: sha256 {} but runtime.accounting.ca_bundle_sha256 is {}; refusing it. Fix: check the download source "
            "(a proxy may serve another file), or, if AWS published a new bundle, check it and update the "
            "sum".format(url, got, expected)
        )
    write_file(node, path, data, mode=0o644)


def slurmdbd_conf(node: Node, password: str) -> str:
    accounting = node.options.accounting
    external = accounting.database == "external"
    return render_slurmdbd_conf(
        dbd_host=node.hostname,
        storage_host=(accounting.host or "") if external else "localhost",
        storage_port=accounting.port,
        storage_user=accounting.user,
        storage_pass=password,
        storage_loc=DB_NAME,
        ssl_ca=ca_bundle_path(node),
        jwt_key=JWT_KEY_PATH if node.params.rest_api is not None else None,
    )


class SlurmdbdConfig(Step):
    name = "slurmdbd-config"

    def _password(self, node: Node) -> Optional[str]:
        if node.options.accounting.database == "external":
            return None
        stored = read_text(node, DB_PASSWORD_FILE)
        return stored.strip() if stored is not None else None

    def needed(self, node: Node) -> bool:
        password = self._password(node)
        path = conf_path(node, "slurmdbd.conf")
        if password is None:  # the external database's: not read back here, so the file's other lines are checked
            text = read_text(node, path)
            jwt_wanted = node.params.rest_api is not None
            return text is None or not ca_bundle_current(node) or ("AuthAltTypes=" in text) != jwt_wanted
        return not file_matches(node, path, slurmdbd_conf(node, password), 0o600, SLURM_USER, SLURM_USER)

    def apply(self, node: Node) -> None:
        fetch_ca_bundle(node)
        password = self._password(node)
        if password is None:
            password = (
                external_password(node) if node.options.accounting.database == "external" else database_password(node)
            )
        write_file(
            node,
            conf_path(node, "slurmdbd.conf"),
            slurmdbd_conf(node, password),
            mode=0o600,
            owner=SLURM_USER,
            group=SLURM_USER,
        )

    def describe(self, node: Node) -> List[str]:
        bundle = ca_bundle_path(node)
        fetch = (
            ["download {} to {} (sha256 checked)".format(node.options.accounting.ca_bundle_url, bundle)]
            if bundle
            else []
        )
        conf = "write {} (slurm, 0600; holds the database password)".format(conf_path(node, "slurmdbd.conf"))
        return [*fetch, conf]


def forget_cluster_id(node: Node) -> None:
    """On HyperPod, slurmctld ran before accounting existed and saved a ClusterID of its own in its state
    directory; the database just gave the cluster another one, and slurmctld refuses to start with the
    two differing ("CLUSTER ID MISMATCH"). Removing the saved ID (the cluster has just been registered, so
    no other cluster's state is there) lets the restarted slurmctld take the database's."""
    text = read_text(node, conf_path(node, "slurm.conf")) or ""
    found = re.search(r"^\s*StateSaveLocation\s*=\s*(\S+)", text, re.MULTILINE | re.IGNORECASE)
    state_dir = found.group(1) if found else DEFAULT_STATE_SAVE_LOCATION
    node.path(state_dir.rstrip("/") + "/clustername").unlink(missing_ok=True)


class AccountingCluster(Step):
    """The cluster is registered in slurmdbd before slurmctld starts."""

    name = "accounting-cluster"

    def _registered(self, node: Node) -> Optional[bool]:
        result = node.run(
            [node.slurm.command("sacctmgr"), "-n", "-P", "list", "cluster", "format=cluster"], check=False, timeout=30
        )
        if not result.ok:
            return None
        return slurm_cluster_name(node) in result.stdout.split()

    def needed(self, node: Node) -> bool:
        return self._registered(node) is not True

    def apply(self, node: Node) -> None:
        def answering() -> bool:
            registered = self._registered(node)
            if registered is None:
                raise NotReady("slurmdbd is not answering yet")
            return registered

        if not node.retry.call(answering, what="slurmdbd"):
            node.run([node.slurm.command("sacctmgr"), "-i", "add", "cluster", slurm_cluster_name(node)], timeout=60)
            if node.platform == HYPERPOD:
                forget_cluster_id(node)

    def describe(self, node: Node) -> List[str]:
        return ["sacctmgr add cluster " + slurm_cluster_name(node)]
