"""The login pool's SSH host keys as one Secrets Manager value: the bundle format, its generation, and the one
token every login node writes it with.

**The bundle** (the secret's ``AWSCURRENT`` ``SecretString``) is a JSON object::

    {"format": "hyperpod-cdk-login-pool-host-keys", "version": 1,
     "keys": {"ed25519": {"private": "-----BEGIN OPENSSH PRIVATE KEY-----...", "public": "ssh-ed25519 AAAA... c"},
              "ecdsa": {...}, "rsa": {...}}}

one OpenSSH private key per type sshd serves by default (ed25519, ecdsa P-256, rsa 3072), each with its public line.
The public line is derivable from the private key (``ssh-keygen -y``; a unit test checks that each one matches); it is
kept beside it so that a node installs both without running anything. Anything else in the secret (the stack's
generated placeholder) is *not a bundle*: the first login node replaces it. A value that names this format but does
not parse is an error (never overwritten: it may be an operator's).

**Who writes it.** Every login node that finds no bundle generates one and writes it with ``PutSecretValue`` and the
same ``ClientRequestToken``, :func:`client_request_token` (derived from the secret's ARN and the version id of the
placeholder it replaces). Secrets Manager's API reference, PutSecretValue, ``ClientRequestToken``: "If the
ClientRequestToken value isn't already associated with a version of the secret then a new version of the secret is
created." / "If a version with this value already exists and that version's SecretString or SecretBinary values are
the same as those in the request then the request is ignored. The operation is idempotent." / "If a version with this
value already exists and the version of the SecretString and SecretBinary values are different from those in the
request, then the request fails because you can't modify a secret version." / "This value becomes the VersionId of
the new version." The failure is ``ResourceExistsException`` (API model secretsmanager-2017-10-17: "A resource with
the ID you requested already exists."). So the first node's bundle becomes ``AWSCURRENT``, every other node's write
fails and it re-reads the secret and installs the winner's keys. Deriving the token from the placeholder's version
as well lets an operator regenerate the keys: put a new placeholder (a new version) and the next login node to boot
writes a new bundle under a new token.

The keys are made by ``ssh-keygen`` in a private temporary directory (0700, removed after), read back and never
passed on a command line or logged. Stdlib only (Python 3.8+).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from typing import Callable, Dict, List, Optional, Sequence, Tuple

FORMAT = "hyperpod-cdk-login-pool-host-keys"
VERSION = 1
KEY_TYPES = ("ed25519", "ecdsa", "rsa")
"""The host keys Debian's and Ubuntu's sshd load by default (sshd(8), ``-h``: "The default is
/etc/ssh/ssh_host_ecdsa_key, /etc/ssh/ssh_host_ed25519_key and /etc/ssh/ssh_host_rsa_key")."""
KEY_BITS = {"ed25519": None, "ecdsa": 256, "rsa": 3072}
PUBLIC_PREFIX = {"ed25519": "ssh-ed25519 ", "ecdsa": "ecdsa-sha2-nistp256 ", "rsa": "ssh-rsa "}
PRIVATE_BEGIN = "-----BEGIN OPENSSH PRIVATE KEY-----"
COMMENT = "hyperpod-cdk-login-pool"
TOKEN_NAMESPACE = uuid.UUID("6b1f3c0e-41a4-4c55-9d1b-6c6f67696e70")
"""Fixed: every node derives the same token (a version 5 UUID, 36 characters; the API takes 32 to 64)."""

Keys = Dict[str, Tuple[str, str]]
"""Key type -> (private key, public line)."""
KeyGen = Callable[[Sequence[str]], None]
"""Runs one ``ssh-keygen`` command line (stdin closed, output discarded); raises on failure."""


class BundleError(ValueError):
    """The secret names the bundle format but is not a valid bundle; the message never holds a key."""


def client_request_token(secret_arn: str, replaced_version: str) -> str:
    """The ``ClientRequestToken`` of the bundle that replaces version ``replaced_version`` of ``secret_arn``: the
    same on every node."""
    return str(uuid.uuid5(TOKEN_NAMESPACE, secret_arn + "\n" + replaced_version))


def parse_bundle(text: str) -> Optional[Keys]:
    """The keys of a bundle; None when ``text`` is not one (the stack's placeholder); :class:`BundleError` when it
    claims the format and is broken."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    if data.get("version") != VERSION:
        raise BundleError("host-key bundle version {!r}; this runtime reads version {}".format(data.get("version"), 1))
    raw = data.get("keys")
    if not isinstance(raw, dict):
        raise BundleError("host-key bundle: 'keys' is not an object")
    keys: Keys = {}
    problems: List[str] = []
    for kind in KEY_TYPES:
        entry = raw.get(kind)
        private = entry.get("private") if isinstance(entry, dict) else None
        public = entry.get("public") if isinstance(entry, dict) else None
        if not isinstance(private, str) or not private.startswith(PRIVATE_BEGIN):
            problems.append("keys.{}.private is not an OpenSSH private key".format(kind))
        elif not isinstance(public, str) or not public.startswith(PUBLIC_PREFIX[kind]) or "\n" in public.strip():
            problems.append("keys.{}.public is not one {}line".format(kind, PUBLIC_PREFIX[kind]))
        else:
            keys[kind] = (private if private.endswith("\n") else private + "\n", public.strip() + "\n")
    unknown = sorted(set(raw) - set(KEY_TYPES))
    if unknown:
        problems.append("keys: unknown types {}".format(", ".join(unknown)))
    if problems:
        raise BundleError("host-key bundle: " + "; ".join(problems))
    return keys


def dump_bundle(keys: Keys) -> str:
    body = {kind: {"private": keys[kind][0], "public": keys[kind][1].strip()} for kind in KEY_TYPES}
    return json.dumps({"format": FORMAT, "version": VERSION, "keys": body}, sort_keys=True)


def keygen_argv(kind: str, path: str) -> List[str]:
    """``ssh-keygen`` for one host key without a passphrase at ``path`` (the key itself is never on a command line)."""
    bits = KEY_BITS[kind]
    return ["ssh-keygen", "-q", "-t", kind, *(["-b", str(bits)] if bits else []), "-N", "", "-C", COMMENT, "-f", path]


def generate_keys(keygen: KeyGen, workdir: Optional[str] = None) -> Keys:
    """A new key of every type, made by ``keygen`` in a fresh 0700 directory (under ``workdir``) removed after."""
    private_dir = tempfile.mkdtemp(prefix="hpcdk-host-keys-", dir=workdir)  # mkdtemp: 0700, owner only
    try:
        os.chmod(private_dir, 0o700)
        keys: Keys = {}
        for kind in KEY_TYPES:
            path = os.path.join(private_dir, "ssh_host_{}_key".format(kind))
            keygen(keygen_argv(kind, path))
            with open(path) as private, open(path + ".pub") as public:
                keys[kind] = (private.read(), public.read())
        return keys
    finally:
        shutil.rmtree(private_dir, ignore_errors=True)


def fingerprint_line(public: str) -> str:
    """The key type and its base64 body (the comment dropped): what ssh-keyscan shows of the same key."""
    fields = public.split()
    return " ".join(fields[:2])


def public_lines(keys: Keys) -> Dict[str, str]:
    return {kind: fingerprint_line(keys[kind][1]) for kind in KEY_TYPES if kind in keys}
