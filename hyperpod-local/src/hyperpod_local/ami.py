"""The pieces HyperPod's 2026 AMI sets up before the lifecycle script, laid down on an emulated node as files.

``hyperpod-local up --preconfigured-ami`` (``Variant(preconfigured_ami=True)``): since 2026-05 HyperPod's Slurm AMI
configures "Slurm accounting, SSH key generation, log rotation, user home directory" and ships "Docker, Enroot, Pyxis"
(third-party summaries of AWS's What's New posts, research note ``docs/research/hyperpod-2026-fidelity.md`` §2, §4), and
carries Slurm 24.11 and 25.11 as ``/opt/slurm-24.11`` and ``/opt/slurm-25.11`` behind the ``/opt/slurm`` link
(awslabs/awsome-distributed-ai PR #1107). Without the switch a node is an older AMI: one ``/opt/slurm``, none of these
files.

The files are the AMI's as far as its sources show them, so the runtime's detection (``training_runtime.steps.ami``)
reads what it would read on HyperPod. What is not emulated: Docker; Enroot and Pyxis themselves (``/usr/bin/enroot``
is a stand-in that says so, and the plugstack line names Pyxis as ``optional``, so Slurm runs without the plugin);
the AMI's MariaDB and slurmdbd (its accounting files are there, no database answers ``sacct``); a second Slurm
(both directories hold trixie's 24.11: the layout is HyperPod's, the binaries are one). Every file is written only
when missing, so a node prepared again keeps them byte for byte.
"""

from __future__ import annotations

from training_runtime.groups import CONTROLLER
from training_runtime.hyperpod_facts import (
    ACCOUNTING_DATABASE,
    AMI_DEFAULT_USER,
    AMI_SLURM_VERSIONS,
    DLAMI_NVME,
    ENROOT_BIN,
    ENROOT_CONF,
    ENROOT_NVME_PATHS,
    LOGROTATE_DIR,
    PYXIS_PLUGIN_INSTALLED,
    SLURM_LOG_DIR,
    SLURM_PREFIX,
    SLURMDBD_PID_FILE,
    SLURMDBD_PORT,
)
from training_runtime.node import HYPERPOD_SLURM
from training_runtime.paths import DB_SOCKET, MARIADBD_ARGV, MARIADBD_PID_FILE

SLURM_VERSIONS = AMI_SLURM_VERSIONS
"""The AMI's Slurm directories (``/opt/slurm-<version>``); the first is the active one."""
ENROOT_HEADER = "# Enroot paths on the instance store, as HyperPod's AMI sets them (emulated by hyperpod-local)"
ENROOT_CONF_TEXT = "\n".join((ENROOT_HEADER, *ENROOT_NVME_PATHS)) + "\n"
"""NVMe paths as AWS's ``install_enroot_pyxis.sh`` writes them when ``dlami-nvme.service`` is active (§4)."""
ENROOT_STANDIN = (
    '#!/bin/sh\necho "enroot: a stand-in laid down by hyperpod-local (Enroot is not installed)" >&2\nexit 1\n'
)
PYXIS_CONF = f"optional {PYXIS_PLUGIN_INSTALLED}\n"
LOGROTATE = SLURM_LOG_DIR + "/*.log {\n    weekly\n    rotate 4\n    compress\n    missingok\n    copytruncate\n}\n"
"""As AWS's ``enable_slurm_log_rotation.sh`` rotates Slurm's logs (``docs/research/hyperpod-lifecycle.md`` §1.2)."""
DEFAULT_USER, DEFAULT_UID = AMI_DEFAULT_USER, 1000
"""The AMI's default account (Ubuntu's first user) with its home and key pair."""


def slurm_layout() -> list[str]:
    """``/opt/slurm`` (a directory in the node root file system) becomes a link to ``/opt/slurm-24.11``, with
    ``/opt/slurm-25.11`` beside it. Runs first, so everything after it goes through the link."""
    active, *others = SLURM_VERSIONS
    slurm = SLURM_PREFIX
    copies = " && ".join(f"cp -a {slurm} {slurm}-{v}" for v in (active, *others))
    removes = " ".join(f"{slurm}-{v}" for v in SLURM_VERSIONS)
    switch = f"rm -rf {slurm} && ln -s {slurm}-{active} {slurm}"
    return [f"[ -L {slurm} ] || {{ rm -rf {removes} && {copies} && {switch}; }}"]


def _file(path: str, content: str, mode: str = "0644", owner: str = "root") -> str:
    body = content.replace("'", "'\\''")
    return (
        f"[ -e {path} ] || {{ printf '%s' '{body}' >{path} && chmod {mode} {path} && chown {owner}:{owner} {path}; }}"
    )


def image(slurm_etc: str) -> list[str]:
    """What the image carries in every mode: Enroot (stand-in binary, NVMe paths), Pyxis in plugstack, host keys."""
    return [
        f"install -d -m 0755 {ENROOT_CONF.rsplit('/', 1)[0]} {DLAMI_NVME} /etc/ssh {slurm_etc}/plugstack.conf.d",
        _file(ENROOT_BIN, ENROOT_STANDIN, "0755"),
        _file(ENROOT_CONF, ENROOT_CONF_TEXT),
        _file(slurm_etc + "/plugstack.conf.d/pyxis.conf", PYXIS_CONF),
        _file(slurm_etc + "/plugstack.conf", f"include {slurm_etc}/plugstack.conf.d/pyxis.conf\n"),
        "ssh-keygen -A -q >/dev/null",
    ]


def setup(role: str, controller_address: str, slurm_etc: str) -> list[str]:
    """What the AMI configures itself where no ``OnCreate`` script takes over (api-driven mode: no lifecycle script or
    ``OnInitComplete``, ``docs/research/hyperpod-2026-fidelity.md`` §2 "Lifecycle modes"): log rotation, the default
    user's home and key pair, and on the controller the accounting files (``slurmdbd.conf`` with a password made on the
    node)."""
    lines = [
        "install -d -m 0755 " + LOGROTATE_DIR,
        _file(LOGROTATE_DIR + "/slurm", LOGROTATE),
        f"id -u {DEFAULT_USER} >/dev/null 2>&1 || useradd --uid {DEFAULT_UID} --create-home --shell /bin/bash "
        + DEFAULT_USER,
        f"[ -e /home/{DEFAULT_USER}/.ssh/id_ed25519 ] || {{ install -d -o {DEFAULT_USER} -g {DEFAULT_USER} -m 0700 "
        f"/home/{DEFAULT_USER}/.ssh && runuser -u {DEFAULT_USER} -- ssh-keygen -q -t ed25519 -N '' "
        f"-f /home/{DEFAULT_USER}/.ssh/id_ed25519; }}",
    ]
    if role == CONTROLLER:
        accounting = (
            "# Slurm accounting as HyperPod's AMI configures it (emulated by hyperpod-local)\n"
            f"AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost={controller_address}\n"
            f"AccountingStoragePort={SLURMDBD_PORT}\nJobAcctGatherType=jobacct_gather/linux\n"
        )
        slurmdbd = (
            "# slurmdbd.conf as the HyperPod AMI writes it (emulated by hyperpod-local)\\n"
            "AuthType=auth/munge\\nDbdHost=%s\\nSlurmUser=slurm\\n"
            f"LogFile={SLURM_LOG_DIR}/slurmdbd.log\\nPidFile={SLURMDBD_PID_FILE}\\n"
            "StorageType=accounting_storage/mysql\\nStorageHost=localhost\\nStorageUser=slurm\\n"
            f"StorageLoc={ACCOUNTING_DATABASE}\\nStoragePass=%s\\n"
        )
        conf = slurm_etc + "/slurmdbd.conf"
        lines += [
            _file(slurm_etc + "/accounting.conf", accounting),
            f"[ -e {conf} ] || {{ pw=$(head -c 18 /dev/urandom | base64 | tr -d '/+=') && "
            f'printf \'{slurmdbd}\' "$(hostname -s)" "$pw" >{conf} && '
            f"chmod 0600 {conf} && chown slurm:slurm {conf}; }}",
        ]
    return lines


def accounting_daemons(slurm_etc: str) -> list[str]:
    """On the controller, once munged runs and before slurmctld starts: the AMI's MariaDB with the accounting
    database and user (the password from its slurmdbd.conf), slurmdbd, and the cluster registered (slurmctld
    24.11 waits for its ClusterID from slurmdbd before it serves anything)."""
    mariadb = " ".join(MARIADBD_ARGV)
    socket = "--socket=" + DB_SOCKET
    sql = (  # on stdin through the shell's own printf: the password is in no command line
        f"CREATE DATABASE IF NOT EXISTS {ACCOUNTING_DATABASE}; CREATE USER IF NOT EXISTS 'slurm'@'localhost' "
        f"IDENTIFIED BY '%s'; GRANT ALL ON {ACCOUNTING_DATABASE}.* TO 'slurm'@'localhost';"
    )
    sacctmgr = HYPERPOD_SLURM.command("sacctmgr")
    return [
        "[ -d /var/lib/mysql/mysql ] || { install -d -o mysql -g adm -m 0750 /var/log/mysql && "
        "mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >/dev/null; }",
        "install -d -o mysql -g mysql -m 0755 /run/mysqld",
        f"running {MARIADBD_PID_FILE} mariadbd || {mariadb}",
        f"i=0; until mariadb-admin {socket} ping >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 120 ]; sleep 0.5; done",
        f"pw=$(sed -n 's/^StoragePass=//p' {slurm_etc}/slurmdbd.conf)",
        f'printf "{sql}\\n" "$pw" | mariadb {socket}',
        f"running {SLURMDBD_PID_FILE} slurmdbd || {HYPERPOD_SLURM.command('slurmdbd', True)}",
        f"name=$(sed -n 's/^ClusterName=//p' {slurm_etc}/slurm.conf)",
        f'i=0; until {sacctmgr} -n -P list cluster format=cluster 2>/dev/null | grep -qix "$name"; do '
        f'{sacctmgr} -i add cluster "$name" >/dev/null 2>&1 || true; i=$((i+1)); [ $i -lt 60 ]; sleep 0.5; done',
    ]
