"""The organization's LDAP directory (OpenLDAP, AWS Managed Microsoft AD): the config's ``directory:`` (issue #41).

Every node resolves the directory's users and groups through SSSD (:mod:`training_runtime.steps.directory`), so UIDs
and GIDs are the directory's, the same on every node and after a node is replaced. The bind password never travels
in the config or the parameters file: only the ARN of the Secrets Manager secret that holds it, which each node reads
with its execution role at boot. The same rules check a config at synth time (:func:`directory_problems`) and the
parameters file on the node. Stdlib only (Python 3.8+).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from training_runtime.option_types import SECRET_ARN
from training_runtime.problems import Problem, RuleBook

SCHEMAS = ("rfc2307", "rfc2307bis", "ad")
"""sssd-ldap(5) ``ldap_schema``: rfc2307 (``memberUid`` names), rfc2307bis (``member`` DNs, nested groups), ad."""
HOMES = ("shared", "directory")
MIN_SYNC_S, MAX_SYNC_S = 5, 300
"""The group sync's interval bounds: at most 5 minutes (a new member can submit within that)."""
DEFAULT_SYNC_S = 300
URI = re.compile(r"^(ldaps?)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)(:(\d{1,5}))?/?$")
"""sssd-ldap(5): "The format of the URI must match the format defined in RFC 2732: ldap[s]://<host>[:port]"."""
DN = re.compile(r"^[A-Za-z][A-Za-z0-9-]*=[^,=]+(,\s*[A-Za-z][A-Za-z0-9-]*=[^,=]+)*$")
COMPLETE_SECRET_ARN = re.compile(r"-[A-Za-z0-9]{6}$")
"""Secrets Manager appends six random characters to a secret's name in its ARN; a partial ARN lacks them."""
KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]{1,128}$")
S3_URI = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(\S+)$")
PEM = re.compile(r"^-----BEGIN CERTIFICATE-----\n[A-Za-z0-9+/=\n]+-----END CERTIFICATE-----\n?$")
ATTRIBUTE = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,63}$")
GROUP_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_. -]{0,63}$")
"""A directory group's name as ``getent group`` takes it (AD names may hold spaces and capitals)."""
KEYS = (
    "uris",
    "search_base",
    "bind_dn",
    "bind_password_secret_arn",
    "bind_password_kms_key_arn",
    "ca_certificate",
    "start_tls",
    "schema",
    "id_mapping",
    "access_filter",
    "ssh_public_key_attribute",
    "homes",
    "group_sync_interval_s",
)


@dataclass(frozen=True)
class Directory:
    """An LDAP directory whose users and groups every node resolves through SSSD (docs/directory.md)."""

    uris: Tuple[str, ...]
    """The LDAP servers, in order of preference: ``ldaps://host[:port]``; ``ldap://`` only with ``start_tls: true``
    (sssd-ldap(5) ``ldap_uri``). Use the names the servers' certificates carry."""
    search_base: str
    """Where users and groups are searched (``ldap_search_base``), e.g. ``dc=corp,dc=example,dc=com``."""
    bind_dn: str
    """The read-only account SSSD binds as (``ldap_default_bind_dn``)."""
    bind_password_secret_arn: str
    """The Secrets Manager secret holding the bind password (its value, or JSON ``{"password": ...}``). Never the
    password itself: each node reads the secret with its execution role at boot and writes it into sssd.conf only."""
    bind_password_kms_key_arn: Optional[str] = None
    """The customer-managed KMS key the secret is encrypted with, if any: the nodes' roles get ``kms:Decrypt`` on it
    through Secrets Manager only. Default: none (the secret uses the AWS managed key)."""
    ca_certificate: Optional[str] = None
    """The CA certificate (PEM) that signed the servers' certificates, inline or as ``s3://bucket/key`` (read by each
    node with its role; sssd-ldap(5) ``ldap_tls_cacert``). Default: the node's system CA bundle."""
    start_tls: bool = False
    """With ``ldap://`` URIs: require StartTLS (``ldap_id_use_start_tls``). Without it SSSD sends the bind password
    in clear text over ``ldap://``, which is refused."""
    schema: str = "rfc2307"
    """``rfc2307`` (OpenLDAP's nis schema: ``memberUid``), ``rfc2307bis`` (``member`` DNs, nested groups) or ``ad``
    (Active Directory: ``sAMAccountName``, nested groups). sssd-ldap(5) ``ldap_schema``."""
    id_mapping: bool = False
    """AD only: derive UIDs and GIDs from the objectSID instead of the uidNumber and gidNumber attributes
    (``ldap_id_mapping``), for an AD whose users have no POSIX attributes. The same on every node (the algorithm is
    deterministic), but they differ from any other system's numbering."""
    access_filter: Optional[str] = None
    """Only users matching this LDAP filter may log in (``ldap_access_filter``), e.g.
    ``(memberOf=cn=hpc-users,ou=groups,dc=corp,dc=example,dc=com)``. Default: every user the search base holds."""
    ssh_public_key_attribute: Optional[str] = "sshPublicKey"
    """The attribute holding users' SSH public keys, served to sshd by ``sss_ssh_authorizedkeys``
    (``ldap_user_ssh_public_key``); AD sites often use ``altSecurityIdentities``. null: keys only from
    ``~/.ssh/authorized_keys``."""
    homes: str = "shared"
    """``shared``: every directory user's home is ``<shared homes>/<name>`` (where declared users' homes are), made on
    first login with the user's owner (``override_homedir``, pam_mkhomedir); ``directory``: the directory's
    ``homeDirectory`` as it is (it must then be on shared storage to be the same on every node)."""
    group_sync_interval_s: int = DEFAULT_SYNC_S
    """Seconds between the controller's syncs of teams' ``directory_group`` members into Slurm associations
    (5 to 300)."""

    def to_json(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {k: getattr(self, k) for k in KEYS}
        data["uris"] = list(self.uris)
        return data

    @property
    def secret_region(self) -> str:
        return self.bind_password_secret_arn.split(":")[3]

    @property
    def needs_start_tls(self) -> bool:
        return any(u.startswith("ldap://") for u in self.uris)


def directory_problems(raw: Any, path: str = "directory") -> List[Problem]:
    problems: List[Problem] = []
    _parse(raw, path, problems)
    return problems


def parse_directory(raw: Any, path: str = "directory") -> Optional[Directory]:
    """The directory (None when ``raw`` is None); ValueError listing every problem."""
    problems: List[Problem] = []
    found = _parse(raw, path, problems)
    if problems:
        raise ValueError("\n".join(problems))
    return found


def _text(raw: Mapping[str, Any], key: str) -> Optional[str]:
    value = raw.get(key)
    return value if isinstance(value, str) and value else None


def _parse(raw: Any, path: str, problems: List[Problem]) -> Optional[Directory]:
    def add(key: str, expected: str, rule: str, fix: str = "", **got: Any) -> None:
        problems.append(Problem(path + ("." + key if key else ""), expected, fix=fix, rule=rule, **got))

    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        add("", "expected a mapping (uris, search_base, bind_dn, ...)", "DIR-SHAPE", got=raw)
        return None
    before = len(problems)
    for key in sorted(set(raw) - set(KEYS)):
        add(key, "unknown field; allowed: " + ", ".join(KEYS), "DIR-SHAPE", fix="remove it or correct its spelling")
    start_tls = raw.get("start_tls", False)
    if not isinstance(start_tls, bool):
        add("start_tls", "expected true or false", "DIR-SHAPE", got=start_tls)
        start_tls = False
    uris = raw.get("uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
        add("uris", "expected a list of one or more LDAP URIs", "DIR-URI", fix="e.g. [ldaps://dc1.corp.example.com]")
        uris = []
    for index, uri in enumerate(uris):
        match = URI.fullmatch(uri)
        where = "uris[{}]".format(index)
        if match is None or (match.group(5) is not None and not 0 < int(match.group(5)) < 65536):
            add(where, "expected ldaps://host[:port] (sssd-ldap(5) ldap_uri; no path, no spaces)", "DIR-URI", got=uri)
        elif match.group(1) == "ldap" and not start_tls:
            add(
                where,
                "ldap:// without start_tls: SSSD's default (ldap_id_use_start_tls = false) would send the bind "
                "password and every user's entry in clear text",
                "DIR-URI",
                fix="use ldaps:// (port 636), or set start_tls: true where the server offers StartTLS",
                got=uri,
            )
        elif match.group(1) == "ldaps" and start_tls:
            add(
                where,
                "start_tls applies to ldap:// URIs; ldaps:// is TLS from the first byte",
                "DIR-URI",
                fix="drop start_tls, or use ldap:// URIs with it",
                got=uri,
            )
    for key in ("search_base", "bind_dn"):
        value = raw.get(key)
        if not isinstance(value, str) or not DN.fullmatch(value.strip()):
            add(
                key,
                "expected an LDAP distinguished name (attr=value,...)",
                "DIR-DN",
                got=value,
                fix="e.g. dc=corp,dc=example,dc=com",
            )
    secret = raw.get("bind_password_secret_arn")
    if not isinstance(secret, str) or not SECRET_ARN.fullmatch(secret):
        add(
            "bind_password_secret_arn",
            "expected the ARN of a Secrets Manager secret (arn:aws:secretsmanager:<region>:<account>:secret:<name>); "
            "a password never goes in the config, the parameters file or a bucket",
            "DIR-SECRET",
            fix="store the password in Secrets Manager (aws secretsmanager create-secret) and give its ARN",
            got="<not shown>" if isinstance(secret, str) and not secret.startswith("arn:") else secret,
        )
    key_arn = raw.get("bind_password_kms_key_arn")
    if key_arn is not None and (not isinstance(key_arn, str) or not KMS_KEY_ARN.fullmatch(key_arn)):
        add(
            "bind_password_kms_key_arn",
            "expected a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>)",
            "DIR-SECRET",
            got=key_arn,
        )
    ca = raw.get("ca_certificate")
    if ca is not None and (not isinstance(ca, str) or not (S3_URI.fullmatch(ca) or PEM.fullmatch(ca.strip() + "\n"))):
        add(
            "ca_certificate",
            "expected a PEM certificate (-----BEGIN CERTIFICATE----- ...) or an s3://bucket/key URI",
            "DIR-CA",
            got=ca if not isinstance(ca, str) else ca[:60],
        )
    schema = raw.get("schema", "rfc2307")
    if schema not in SCHEMAS:
        add(
            "schema",
            "allowed: " + ", ".join(SCHEMAS),
            "DIR-SCHEMA",
            got=schema,
            fix="OpenLDAP's nis schema is rfc2307; Active Directory is ad",
        )
    id_mapping = raw.get("id_mapping", False)
    if not isinstance(id_mapping, bool):
        add("id_mapping", "expected true or false", "DIR-SHAPE", got=id_mapping)
        id_mapping = False
    elif id_mapping and schema != "ad":
        add(
            "id_mapping",
            "ID mapping derives IDs from Active Directory's objectSID; schema {!r} has uidNumber attributes".format(
                schema
            ),
            "DIR-SCHEMA",
            fix="drop id_mapping, or set schema: ad",
            got=id_mapping,
        )
    access_filter = raw.get("access_filter")
    if access_filter is not None and not _is_filter(access_filter):
        add(
            "access_filter",
            "expected one parenthesized LDAP filter, e.g. (memberOf=cn=hpc,ou=groups,dc=corp)",
            "DIR-FILTER",
            got=access_filter,
        )
    attribute = raw.get("ssh_public_key_attribute", "sshPublicKey")
    if attribute is not None and (not isinstance(attribute, str) or not ATTRIBUTE.fullmatch(attribute)):
        add("ssh_public_key_attribute", "expected an LDAP attribute name, or null", "DIR-SHAPE", got=attribute)
    homes = raw.get("homes", "shared")
    if homes not in HOMES:
        add("homes", "allowed: " + ", ".join(HOMES), "DIR-SHAPE", got=homes)
    interval = raw.get("group_sync_interval_s", DEFAULT_SYNC_S)
    if isinstance(interval, bool) or not isinstance(interval, int) or not MIN_SYNC_S <= interval <= MAX_SYNC_S:
        add(
            "group_sync_interval_s",
            "expected whole seconds from {} to {} (a new group member can submit within it)".format(
                MIN_SYNC_S, MAX_SYNC_S
            ),
            "DIR-SHAPE",
            got=interval,
        )
    if len(problems) > before:
        return None
    return Directory(
        uris=tuple(uris),
        search_base=str(raw["search_base"]).strip(),
        bind_dn=str(raw["bind_dn"]).strip(),
        bind_password_secret_arn=str(secret),
        bind_password_kms_key_arn=key_arn,
        ca_certificate=ca.strip() + "\n" if isinstance(ca, str) and not ca.startswith("s3://") else ca,
        start_tls=start_tls,
        schema=str(schema),
        id_mapping=id_mapping,
        access_filter=access_filter,
        ssh_public_key_attribute=attribute,
        homes=str(homes),
        group_sync_interval_s=int(interval),
    )


def _is_filter(text: Any) -> bool:
    """One balanced, parenthesized filter without a line break (sssd.conf holds it on one line)."""
    if not isinstance(text, str) or not text.startswith("(") or not text.endswith(")") or "\n" in text:
        return False
    depth = 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0 or (depth == 0 and index != len(text) - 1):
            return False
    return depth == 0 and len(text) > 2


def secret_resource(arn: str) -> str:
    """The IAM resource of the secret: the ARN itself when complete, else the ARN with ``-??????`` (Secrets Manager
    user guide, "Permissions policy examples": a partial ARN matches with the six random characters as ``??????``)."""
    return arn if COMPLETE_SECRET_ARN.search(arn) else arn + "-??????"


DIRECTORY_RULES = RuleBook("directory")
"""The directory rules; one parsing pass checks them all (:func:`directory_problems`)."""
for _id, _field, _doc in (
    ("DIR-SHAPE", "directory", "directory holds the known fields with values of the right type."),
    ("DIR-URI", "directory.uris", "LDAP servers are ldaps:// URIs, or ldap:// with start_tls: true."),
    ("DIR-DN", "directory.{search_base,bind_dn}", "The search base and the bind DN are distinguished names."),
    (
        "DIR-SECRET",
        "directory.bind_password_secret_arn",
        "The bind password is a Secrets Manager secret's ARN, never a literal.",
    ),
    ("DIR-CA", "directory.ca_certificate", "The CA certificate is inline PEM or an s3:// URI."),
    (
        "DIR-SCHEMA",
        "directory.{schema,id_mapping}",
        "The schema is rfc2307, rfc2307bis or ad; id_mapping only with ad.",
    ),
    ("DIR-FILTER", "directory.access_filter", "The access filter is one parenthesized LDAP filter."),
):
    DIRECTORY_RULES.declare(
        _id, "directory", _field, _doc, directory_problems, source="sssd-ldap(5); sssd.conf(5); hyperpod-cdk"
    )


def group_members(getent_line: str) -> Optional[Tuple[str, ...]]:
    """The member names of one ``getent group`` line (``name:x:gid:a,b``); None when it is not one."""
    fields = getent_line.strip().split(":")
    if len(fields) != 4 or not fields[2].isdigit():
        return None
    return tuple(sorted({m for m in fields[3].split(",") if m}))


def passwd_entry(getent_line: str) -> Optional[Tuple[str, int, int, str]]:
    """(name, uid, gid, home) of one ``getent passwd`` line; None when it is not one."""
    fields = getent_line.strip().split(":")
    if len(fields) != 7 or not fields[2].isdigit() or not fields[3].isdigit():
        return None
    return fields[0], int(fields[2]), int(fields[3]), fields[5]
