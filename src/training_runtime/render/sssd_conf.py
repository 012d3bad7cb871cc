"""What a directory-backed node's identity files say: sssd.conf, nsswitch.conf's lines, sshd's drop-in and the
compute nodes' sshd PAM stack (pure: text in, text out).

The options are sssd.conf(5)'s and sssd-ldap(5)'s. SSSD's defaults are kept where they are right: ``enumerate =
false`` (no full listing of a large directory), ``cache_credentials = false`` (no offline logins with a cached
password), ``ldap_tls_reqcert = demand`` (a server whose certificate does not verify is refused). Stdlib only.
"""

from __future__ import annotations

import re
from typing import List, Optional

from training_runtime.directory import Directory

DOMAIN = "directory"
"""The SSSD domain's name: ``[domain/directory]``; users keep their short names (no ``@domain``)."""
MIN_ID = 1000
"""sssd.conf(5) ``min_id``: "If a domain contains an entry that is outside these limits, it is ignored": a
directory entry with a system ID (uidNumber 0 among them) never becomes a user of the node."""
SSS_AUTHORIZED_KEYS = "/usr/bin/sss_ssh_authorizedkeys"
MKHOMEDIR_UMASK = "0027"
"""Homes made on first login are 0750, as the declared users' (training_runtime.steps.users.HOME_MODE)."""
ADOPT_LINE = "-account required pam_slurm_adopt.so action_adopt_failure=deny action_generic_failure=deny"
"""Slurm's pam_slurm_adopt page: "pam_slurm_adopt.so should be the last PAM module in the account stack", with
the ``-`` so a missing module fails gracefully, and "Production environments should consider setting both
action_adopt_failure and action_generic_failure to deny"."""
ADOPT_MARK = "# hyperpod-cdk: a user reaches this compute node only into a job of theirs (pam_slurm_adopt)"


def sssd_conf(directory: Directory, password: str, homes_dir: str, ca_path: Optional[str]) -> str:
    """sssd.conf for ``directory`` with the bind password ``password`` (the file is root's, 0600)."""
    if "\n" in password or "\r" in password:
        raise ValueError("the bind password spans lines; sssd.conf holds it on one line")
    services = ["nss", "pam"] + (["ssh"] if directory.ssh_public_key_attribute else [])
    lines = [
        "# Managed by hyperpod-cdk from the config's directory: section; edits are overwritten.",
        "[sssd]",
        "services = " + ", ".join(services),
        "domains = " + DOMAIN,
        "",
        "[nss]",
        "filter_users = root",
        "filter_groups = root",
        "",
        "[pam]",
        "",
    ]
    if directory.ssh_public_key_attribute:
        lines += ["[ssh]", ""]
    lines += [
        "[domain/{}]".format(DOMAIN),
        "id_provider = ldap",
        "auth_provider = ldap",
        "chpass_provider = none",
        "access_provider = {}".format("ldap" if directory.access_filter else "permit"),
        "ldap_uri = " + ", ".join(directory.uris),
        "ldap_search_base = " + directory.search_base,
        "ldap_schema = " + directory.schema,
        "ldap_default_bind_dn = " + directory.bind_dn,
        "ldap_default_authtok_type = password",
        "ldap_default_authtok = " + password,
        "ldap_tls_reqcert = demand",
        "ldap_id_use_start_tls = " + ("true" if directory.needs_start_tls else "false"),
        "ldap_id_mapping = " + ("true" if directory.id_mapping else "false"),
        "min_id = {}".format(MIN_ID),
        "enumerate = false",
        "cache_credentials = false",
    ]
    if ca_path:
        lines.append("ldap_tls_cacert = " + ca_path)
    if directory.schema == "ad":
        lines.append("ldap_referrals = false")  # AD's referrals to other domains stall lookups (sssd-ldap(5))
    if directory.access_filter:
        lines += ["ldap_access_order = filter", "ldap_access_filter = " + directory.access_filter]
    if directory.ssh_public_key_attribute:
        lines.append("ldap_user_ssh_public_key = " + directory.ssh_public_key_attribute)
    if directory.homes == "shared":
        lines.append("override_homedir = {}/%u".format(homes_dir.rstrip("/")))
    return "\n".join(lines) + "\n"


_DATABASE = re.compile(r"^(passwd|group):(.*)$")


def nsswitch_with_sss(text: str) -> str:
    """``text`` (nsswitch.conf) with ``sss`` after the other sources of ``passwd`` and ``group`` (files first: the
    declared users in /etc/passwd win); lines missing are added."""
    seen = set()
    out: List[str] = []
    for line in text.splitlines():
        match = _DATABASE.fullmatch(line)
        if match is None:
            out.append(line)
            continue
        database, sources = match.group(1), match.group(2).split()
        seen.add(database)
        if "sss" not in sources:
            sources.append("sss")
        out.append("{}:{}{}".format(database, " " * max(1, 14 - len(database)), " ".join(sources)))
    for database in ("passwd", "group"):
        if database not in seen:
            out.append("{}:{}files sss".format(database, " " * (14 - len(database))))
    return "\n".join(out) + "\n"


def sshd_dropin(directory: Directory) -> Optional[str]:
    """sshd_config(5) lines: users' keys from the directory (``AuthorizedKeysCommand``), run as ``nobody``."""
    if not directory.ssh_public_key_attribute:
        return None
    return (
        "# Managed by hyperpod-cdk: SSH public keys from the directory ({}).\n"
        "AuthorizedKeysCommand {}\nAuthorizedKeysCommandUser nobody\n".format(
            directory.ssh_public_key_attribute, SSS_AUTHORIZED_KEYS
        )
    )


def sshd_pam_with_adopt(text: str) -> str:
    """``text`` (/etc/pam.d/sshd) with pam_slurm_adopt as the last module of the account stack."""
    kept = [line for line in text.splitlines() if "pam_slurm_adopt" not in line and line != ADOPT_MARK]
    last_account = max((i for i, line in enumerate(kept) if _is_account(line)), default=len(kept) - 1)
    return "\n".join([*kept[: last_account + 1], ADOPT_MARK, ADOPT_LINE, *kept[last_account + 1 :]]) + "\n"


def _is_account(line: str) -> bool:
    words = line.strip().lstrip("-").split()
    return (bool(words) and words[0] == "account") or line.strip().startswith("@include common-account")
