"""A real OpenLDAP server for the local cluster's directory tests: a CA and a server certificate made here with
openssl, and Debian's slapd started on one node with them (LDAPS only, plus ldapi:// for root's changes).

The directory holds ``dc=hpc,dc=test``: the read-only account SSSD binds as (the only one that may read entries:
anonymous reads get nothing, so a node that resolves a user proves the bind password reached it), ``ou=people`` and
``ou=groups`` (RFC 2307: posixAccount, posixGroup with memberUid). Everything reaches the node on standard input,
never on a command line.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from hyperpod_local import LocalCluster

SUFFIX = "dc=hpc,dc=test"
READER = f"cn=reader,{SUFFIX}"
CONFIG_DIR = "/etc/ldap/hpcdk-test.d"
TLS_DIR = "/etc/ldap/hpcdk-test-tls"
SCHEMAS = ("core", "cosine", "nis", "inetorgperson")
SSH_KEY_SCHEMA = """dn: cn=openssh-lpk,cn=schema,cn=config
objectClass: olcSchemaConfig
cn: openssh-lpk
olcAttributeTypes: ( 1.3.6.1.4.1.24552.500.1.1.1.13 NAME 'sshPublicKey' DESC 'an OpenSSH public key'
  EQUALITY octetStringMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.40 )
olcObjectClasses: ( 1.3.6.1.4.1.24552.500.1.1.2.0 NAME 'ldapPublicKey' SUP top AUXILIARY
  DESC 'an entry with OpenSSH public keys' MAY ( sshPublicKey $ uid ) )
"""
"""The OpenSSH LPK attribute and class (their published OIDs), which SSSD's ``ldap_user_ssh_public_key`` reads by
default (``sshPublicKey``); Debian's slapd ships no schema for them."""


@dataclass(frozen=True)
class Tls:
    ca: str
    certificate: str
    key: str


def make_tls(hostname: str) -> Tls:
    """A CA and a certificate for ``hostname`` signed by it (P-256 keys: fast to make), valid two days."""
    with tempfile.TemporaryDirectory() as scratch:
        d = Path(scratch)

        def openssl(*args: str) -> None:
            subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

        ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
        openssl("req", "-x509", *ec, "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"), "-days", "2",
                "-subj", "/CN=hpcdk test CA")  # fmt: skip
        openssl("req", *ec, "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"), "-subj", f"/CN={hostname}")
        (d / "ext").write_text(f"subjectAltName=DNS:{hostname}\nextendedKeyUsage=serverAuth\n")
        openssl("x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca.key"),
                "-CAcreateserial", "-out", str(d / "server.pem"), "-days", "2", "-extfile", str(d / "ext"))  # fmt: skip
        return Tls((d / "ca.pem").read_text(), (d / "server.pem").read_text(), (d / "server.key").read_text())


def _config() -> str:
    includes = "".join(f"include: file:///etc/ldap/schema/{s}.ldif\n" for s in SCHEMAS) + "\n" + SSH_KEY_SCHEMA
    return f"""dn: cn=config
objectClass: olcGlobal
cn: config
olcTLSCACertificateFile: {TLS_DIR}/ca.pem
olcTLSCertificateFile: {TLS_DIR}/server.pem
olcTLSCertificateKeyFile: {TLS_DIR}/server.key
olcPidFile: /run/slapd-hpcdk-test.pid

dn: cn=module{{0}},cn=config
objectClass: olcModuleList
cn: module{{0}}
olcModulePath: /usr/lib/ldap
olcModuleLoad: back_mdb

dn: cn=schema,cn=config
objectClass: olcSchemaConfig
cn: schema

{includes}
dn: olcDatabase={{-1}}frontend,cn=config
objectClass: olcDatabaseConfig
objectClass: olcFrontendConfig
olcDatabase: {{-1}}frontend

dn: olcDatabase={{0}}config,cn=config
objectClass: olcDatabaseConfig
olcDatabase: {{0}}config
olcAccess: to * by dn.exact=gidNumber=0+uidNumber=0,cn=peercred,cn=external,cn=auth manage by * none

dn: olcDatabase={{1}}mdb,cn=config
objectClass: olcDatabaseConfig
objectClass: olcMdbConfig
olcDatabase: {{1}}mdb
olcDbDirectory: /var/lib/ldap-hpcdk-test
olcSuffix: {SUFFIX}
olcRootDN: gidNumber=0+uidNumber=0,cn=peercred,cn=external,cn=auth
olcDbIndex: objectClass,uid,uidNumber,gidNumber,memberUid eq
olcAccess: to attrs=userPassword by anonymous auth by * none
olcAccess: to * by dn.exact={READER} read by * none
"""


def _entries(password: str) -> str:
    return f"""dn: {SUFFIX}
objectClass: dcObject
objectClass: organization
o: hpc test
dc: hpc

dn: {READER}
objectClass: organizationalRole
objectClass: simpleSecurityObject
cn: reader
userPassword: {password}

dn: ou=people,{SUFFIX}
objectClass: organizationalUnit
ou: people

dn: ou=groups,{SUFFIX}
objectClass: organizationalUnit
ou: groups
"""


def user_ldif(name: str, uid: int, gid: int, description: str = "hpc") -> str:
    return f"""dn: uid={name},ou=people,{SUFFIX}
objectClass: inetOrgPerson
objectClass: posixAccount
uid: {name}
cn: {name}
sn: {name}
uidNumber: {uid}
gidNumber: {gid}
homeDirectory: /home/{name}
loginShell: /bin/bash
description: {description}
"""


def group_ldif(name: str, gid: int, members: tuple[str, ...]) -> str:
    lines = "".join(f"memberUid: {m}\n" for m in members)
    return f"dn: cn={name},ou=groups,{SUFFIX}\nobjectClass: posixGroup\ncn: {name}\ngidNumber: {gid}\n{lines}"


class DirectoryServer:
    """slapd on ``node`` of ``cluster``, reachable by the other nodes at ``ldaps://<node>``."""

    def __init__(self, cluster: LocalCluster, node: str) -> None:
        self.cluster, self.node = cluster, node

    def _run(self, argv: list[str], input: str | None = None) -> str:
        done = self.cluster.exec(self.node, argv, input=input, timeout=60)
        assert done.returncode == 0, f"{argv[0]}: {done.stdout}{done.stderr}"
        return done.stdout

    def start(self, tls: Tls, password: str) -> None:
        self._run(["install", "-d", "-m", "0700", TLS_DIR, CONFIG_DIR, "/var/lib/ldap-hpcdk-test"])
        self._run(["install", "-d", "-m", "0755", "/run/slapd"])  # ldapi:///'s socket directory
        for name, text in (("ca.pem", tls.ca), ("server.pem", tls.certificate), ("server.key", tls.key)):
            self._run(["sh", "-c", f"umask 077 && cat > {TLS_DIR}/{name}"], input=text)
        self._run(["slapadd", "-n0", "-F", CONFIG_DIR], input=_config())
        self._run(["slapd", "-h", "ldaps:/// ldapi:///", "-F", CONFIG_DIR])
        self._wait_ready()
        self.modify("add", _entries(password))

    def _wait_ready(self, timeout_s: float = 20.0) -> None:
        """Until slapd answers on ldapi:// (its parent returns before the child serves: an ldapadd at once met
        "Can't contact LDAP server" once in a loaded run)."""
        deadline = time.monotonic() + timeout_s
        while True:
            done = self.cluster.exec(self.node, ["ldapwhoami", "-Q", "-Y", "EXTERNAL", "-H", "ldapi:///"], timeout=10)
            if done.returncode == 0:
                return
            assert time.monotonic() < deadline, f"slapd did not answer in {timeout_s:.0f} s: {done.stderr}"
            time.sleep(0.1)

    def modify(self, how: str, ldif: str) -> None:
        """``ldapadd`` or ``ldapmodify`` as root over ldapi:// (SASL EXTERNAL)."""
        tool = "ldapadd" if how == "add" else "ldapmodify"
        self._run([tool, "-Q", "-Y", "EXTERNAL", "-H", "ldapi:///"], input=ldif)

    def add_key(self, user: str, public_key: str) -> None:
        self.modify(
            "modify",
            f"dn: uid={user},ou=people,{SUFFIX}\nchangetype: modify\nadd: objectClass\nobjectClass: ldapPublicKey\n"
            f"-\nadd: sshPublicKey\nsshPublicKey: {public_key.strip()}\n",
        )

    def set_members(self, group: str, members: tuple[str, ...]) -> None:
        change = f"dn: cn={group},ou=groups,{SUFFIX}\nchangetype: modify\nreplace: memberUid\n"
        self.modify("modify", change + "".join(f"memberUid: {m}\n" for m in members))
