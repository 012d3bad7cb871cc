"""Directory users on every node: SSSD with the directory's UIDs, homes made on first login, SSH keys from the
directory, and pam_slurm_adopt on compute nodes (issue #41; docs/directory.md).

The bind password is read from Secrets Manager with the node's execution role (:mod:`training_runtime.aws_secrets`)
and written to one file only, ``/etc/sssd/sssd.conf`` (root, 0600, as sssd.conf(5) requires); it is never logged,
never on a command line and never in the parameters file. Each step converges: a second bootstrap changes nothing.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

from training_runtime.aws_secrets import SecretError, SecretsManager, endpoint_for, password_of, s3_object
from training_runtime.directory import S3_URI, Directory, passwd_entry
from training_runtime.errors import StepFailed
from training_runtime.files import ensure_dir, file_matches, read_text, write_file
from training_runtime.node import Node
from training_runtime.render.sssd_conf import MKHOMEDIR_UMASK, nsswitch_with_sss, sshd_dropin, sssd_conf
from training_runtime.scaler.credentials import RoleCredentials
from training_runtime.services import Daemon
from training_runtime.spot import IMDS_URL
from training_runtime.steps import Step
from training_runtime.users import User

SSSD_CONF = "/etc/sssd/sssd.conf"
CA_PATH = "/etc/sssd/hyperpod-cdk-directory-ca.pem"
NSSWITCH = "/etc/nsswitch.conf"
SSHD_DROPIN = "/etc/ssh/sshd_config.d/00-hyperpod-cdk-directory.conf"
"""sshd_config(5): "For each keyword, the first obtained value will be used"; Debian and Ubuntu include
``sshd_config.d/*.conf`` at the top of sshd_config, in name order, so ``00-`` comes first."""
SSHD_RUN_DIR = "/run/sshd"
EC2_INSTANCE_CONNECT = "/lib/systemd/system/ssh.service.d/ec2-instance-connect.conf"
"""Ubuntu's ec2-instance-connect package starts sshd with ``-o AuthorizedKeysCommand=...`` (a systemd drop-in)."""
MKHOMEDIR_PROFILE = "/usr/share/pam-configs/hyperpod-cdk-mkhomedir"
PACKAGES = ["sssd", "sssd-ldap", "libnss-sss", "libpam-sss", "sssd-tools"]
"""sss_cache (the group sync's cache refresh) is in sssd-tools on Debian trixie."""
SSSD = Daemon(name="sssd", unit="sssd.service", argv=("/usr/sbin/sssd", "-D"), pid_file="/run/sssd.pid")

PasswordSource = Callable[[Node, Directory], str]


def aws_credentials(node: Node) -> RoleCredentials:
    emulation = node.params.emulation
    return RoleCredentials(emulation.imds_url if emulation is not None and emulation.imds_url else IMDS_URL)


def bind_password(node: Node, directory: Directory) -> str:
    """The bind password from Secrets Manager, read with the instance role (the local cluster's emulated endpoint
    where the emulation names one)."""
    emulation = node.params.emulation
    region = directory.secret_region
    endpoint = endpoint_for(region, emulation.secretsmanager_url if emulation is not None else None)
    client = SecretsManager(endpoint, region, aws_credentials(node))
    arn = directory.bind_password_secret_arn
    try:
        return password_of(client.secret_string(arn), arn)
    except SecretError as error:
        raise StepFailed(
            "the directory's bind password: {}. Fix: check that the secret exists in {}, that this group's execution "
            "role may secretsmanager:GetSecretValue on it (hyperpod-cdk grants it), and that the node reaches Secrets "
            "Manager (NAT gateway or a VPC endpoint)".format(error, region)
        ) from None


def ca_certificate(node: Node, directory: Directory) -> Optional[str]:
    """The CA certificate's PEM: inline, or read from S3 with the instance role; None: the system bundle."""
    given = directory.ca_certificate
    if given is None or not given.startswith("s3://"):
        return given
    match = S3_URI.fullmatch(given)
    assert match is not None  # the directory rules checked it
    try:
        data = s3_object(match.group(1), match.group(2), directory.secret_region, aws_credentials(node))
    except SecretError as error:
        raise StepFailed("the directory's CA certificate: {}. Fix: let the node roles read it".format(error)) from None
    text = data.decode("utf-8", "replace")
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise StepFailed("{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)".format(given))
    return text


def mkhomedir_profile() -> str:
    """A pam-auth-update(8) profile: homes made on first login, 0750 (pam_mkhomedir(8) ``umask``)."""
    return (
        "Name: Create the home directory on first login (hyperpod-cdk directory users)\n"
        "Default: yes\nPriority: 0\nSession-Type: Additional\nSession:\n"
        "\toptional\t\t\tpam_mkhomedir.so umask={}\n".format(MKHOMEDIR_UMASK)
    )


class SssdConfig(Step):
    """sssd.conf (0600 root, the only file holding the bind password), the CA certificate, nsswitch's ``sss``."""

    name = "directory-sssd"

    def __init__(self, directory: Directory, password: PasswordSource = bind_password) -> None:
        self.directory = directory
        self.password = password
        self._wanted: Optional[List[Tuple[str, str, int]]] = None

    def wanted(self, node: Node) -> List[Tuple[str, str, int]]:
        """(path, content, mode) of each file; the secret is read once per run."""
        if self._wanted is None:
            ca = ca_certificate(node, self.directory)
            conf = sssd_conf(
                self.directory, self.password(node, self.directory), node.homes_dir, CA_PATH if ca else None
            )
            files = [(CA_PATH, ca, 0o644)] if ca else []
            self._wanted = [*files, (SSSD_CONF, conf, 0o600)]
        nsswitch = nsswitch_with_sss(read_text(node, NSSWITCH) or "")
        return [*self._wanted, (NSSWITCH, nsswitch, 0o644)]

    def needed(self, node: Node) -> bool:
        return any(not file_matches(node, path, text, mode) for path, text, mode in self.wanted(node))

    def apply(self, node: Node) -> None:
        node.path("/etc/sssd").mkdir(mode=0o711, exist_ok=True)
        for path, text, mode in self.wanted(node):
            write_file(node, path, text, mode=mode)

    def describe(self, node: Node) -> List[str]:
        return [
            "write {} (ldap {}, schema {}, bind password from {})".format(
                SSSD_CONF,
                ", ".join(self.directory.uris),
                self.directory.schema,
                self.directory.bind_password_secret_arn,
            ),
            "passwd and group from files, then sss ({})".format(NSSWITCH),
        ]


class DirectoryPam(Step):
    """pam_sss in the common stacks and a home made on first login (pam-auth-update's profiles)."""

    name = "directory-pam"

    def __init__(self, directory: Directory) -> None:
        self.directory = directory

    def _missing(self, node: Node) -> List[str]:
        auth = read_text(node, "/etc/pam.d/common-auth") or ""
        session = read_text(node, "/etc/pam.d/common-session") or ""
        missing = [] if "pam_sss.so" in auth else ["sss"]
        if self.directory.homes == "shared" and "pam_mkhomedir.so umask=" + MKHOMEDIR_UMASK not in session:
            missing.append("hyperpod-cdk-mkhomedir")
        return missing

    def needed(self, node: Node) -> bool:
        return bool(self._missing(node)) or not file_matches(node, MKHOMEDIR_PROFILE, mkhomedir_profile())

    def apply(self, node: Node) -> None:
        write_file(node, MKHOMEDIR_PROFILE, mkhomedir_profile(), mode=0o644)
        missing = self._missing(node)
        if missing:
            node.run(["pam-auth-update", "--enable", *missing], env={"DEBIAN_FRONTEND": "noninteractive"}, timeout=60)

    def describe(self, node: Node) -> List[str]:
        return ["pam-auth-update --enable " + " ".join(self._missing(node) or ["(nothing)"])]


class SshdDirectoryKeys(Step):
    """sshd asks SSSD for a user's keys (``AuthorizedKeysCommand``); where sshd is not installed, left alone."""

    name = "directory-ssh"

    def __init__(self, directory: Directory) -> None:
        self.directory = directory

    def _sshd(self, node: Node) -> Optional[str]:
        return node.which("sshd", ["/usr/sbin"])

    def needed(self, node: Node) -> bool:
        text = sshd_dropin(self.directory)
        if self._sshd(node) is None:
            return False
        return read_text(node, SSHD_DROPIN) is not None if text is None else not file_matches(node, SSHD_DROPIN, text)

    def apply(self, node: Node) -> None:
        text = sshd_dropin(self.directory)
        if text is None:
            node.path(SSHD_DROPIN).unlink()
        else:
            write_file(node, SSHD_DROPIN, text, mode=0o644)
        sshd = self._sshd(node)
        assert sshd is not None
        # sshd -t refuses to check without its privilege separation directory, which its unit makes at start
        # (systemd's RuntimeDirectory): made here too, as Debian's init script does.
        ensure_dir(node, SSHD_RUN_DIR, mode=0o755)
        node.run([sshd, "-t"], timeout=30)  # a broken sshd configuration fails here, not at the next login
        if node.has_systemd:
            node.run(["systemctl", "reload-or-restart", "ssh"], check=False, timeout=60)

    def left_alone(self, node: Node) -> List[str]:
        if self._sshd(node) is None:
            return ["sshd is not installed: no AuthorizedKeysCommand for directory users' keys"]
        if self.directory.ssh_public_key_attribute and node.path(EC2_INSTANCE_CONNECT).exists():
            return [
                "{} passes its own AuthorizedKeysCommand on sshd's command line, which wins over {}: directory users' "
                "keys are not served (remove the ec2-instance-connect package to use them)".format(
                    EC2_INSTANCE_CONNECT, SSHD_DROPIN
                )
            ]
        return []


class DirectoryClash(Step):
    """A declared user (``users:``) whose name, UID or GID the directory also has is a bootstrap error: files win in
    nsswitch, so the directory's user would silently become the declared one's account."""

    name = "directory-clash"

    def __init__(self, users: List[User]) -> None:
        self.users = users

    def clashes(self, node: Node) -> List[str]:
        found = []
        for user in self.users:
            for key in (user.name, str(user.uid)):
                entry = self._getent(node, "passwd", key)
                if entry is not None:
                    found.append(
                        "declared user {} (uid {}) and directory user {} (uid {})".format(
                            user.name, user.uid, entry[0], entry[1]
                        )
                    )
                    break
            group = self._getent(node, "group", str(user.gid)) or self._getent(node, "group", user.name)
            if group is not None:
                found.append(
                    "declared user {}'s group {} (gid {}) and the directory's group {} (gid {})".format(
                        user.name, user.name, user.gid, group[0], group[1]
                    )
                )
        return found

    def _getent(self, node: Node, database: str, key: str) -> Optional[Tuple[str, int]]:
        result = node.run(["getent", "-s", "sss", database, key], check=False, timeout=30)
        if not result.ok:
            return None
        if database == "passwd":
            entry = passwd_entry(result.stdout.splitlines()[0] if result.stdout else "")
            return (entry[0], entry[1]) if entry else None
        fields = result.stdout.strip().split(":")
        return (fields[0], int(fields[2])) if len(fields) >= 3 and fields[2].isdigit() else None

    def needed(self, node: Node) -> bool:
        return bool(self.clashes(node))

    def apply(self, node: Node) -> None:
        raise StepFailed(
            "users: and the directory both have {}. The runtime never renumbers an account. Fix: remove the user from "
            "users: (the directory's account then serves), or rename it and pick IDs the directory does not use".format(
                "; ".join(self.clashes(node))
            )
        )

    def describe(self, node: Node) -> List[str]:
        return ["refuse: " + c for c in self.clashes(node)]
