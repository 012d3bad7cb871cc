"""Slurm's REST API on every controller (``hyperpod_cdk.rest_api``), before Slurm's daemons start: this Slurm has
slurmrestd and ``auth/jwt``, the JWT key from Secrets Manager, ``auth/jwt`` in HyperPod's included ``accounting.conf``
(the generic slurm.conf and slurmdbd.conf get it from their renderers), and the key loaded again after a rotation.

slurmctld refuses to start when ``jwt_key=`` names a missing file (24.11's auth/jwt ``_check_key_permissions``
fatal()s "cannot stat"), hence the order (:func:`key_steps` here, :func:`training_runtime.steps.rest_service.
service_steps` after slurmctld; their places: :mod:`training_runtime.steps.catalog`). docs/rest-api.md, "On the
controller", says what each does and where AWS is silent.
"""

from __future__ import annotations

import re
from typing import Callable, List, Optional

from training_runtime import services
from training_runtime.errors import StepFailed
from training_runtime.files import ensure_dir, file_matches, read_text, with_block, write_file
from training_runtime.hyperpod_facts import SLURM_PREFIX
from training_runtime.node import GENERIC, Node
from training_runtime.paths import STATE_DIR
from training_runtime.render.jwt_keys import JWT_KEY_DIR, JWT_KEY_PATH, jwt_lines
from training_runtime.rest.rotate import reconfigure
from training_runtime.rest.secret import SecretError, client_for, fetch_key
from training_runtime.steps import Step
from training_runtime.steps.slurm import (
    ACCOUNTING_INCLUDE,
    REST_BLOCK,
    SLURM_USER,
    conf_path,
    includes_accounting,
    slurmdbd,
)

RELOAD_MARKER = STATE_DIR + "/rest-api-key.reload"
"""Written when the key file was replaced while Slurm may hold the old key; :class:`JwtKeyReload` removes it."""
AUTH_KEYS = re.compile(r"^[ \t]*AuthAlt(Types|Parameters)[ \t]*=", re.IGNORECASE | re.MULTILINE)


# --- Slurm's build ---------------------------------------------------------------------------------------
PLUGIN_DIRS = (
    SLURM_PREFIX + "/lib/slurm",
    "/usr/lib/x86_64-linux-gnu/slurm-wlm",
    "/usr/lib/aarch64-linux-gnu/slurm-wlm",
    "/usr/lib64/slurm",
    "/usr/lib/slurm",
)
"""Where Slurm's plugins are: a build under /opt/slurm (HyperPod's AMI), Debian's and Ubuntu's packages, RPMs."""
PLUGIN_DIR_KEY = re.compile(r"^[ \t]*PluginDir[ \t]*=[ \t]*(\S+)", re.IGNORECASE | re.MULTILINE)


def missing_pieces(node: Node) -> List[str]:
    """What this node's Slurm lacks for the REST API: slurmrestd, the auth/jwt plugin (built only where libjwt was
    there: jwt.html, "JWT requires libjwt. Both the library and the development headers must be available when Slurm
    is compiled")."""
    missing = []
    slurmrestd = node.slurm.command("slurmrestd", daemon=True)
    if not (node.path(slurmrestd).is_file() if slurmrestd.startswith("/") else node.which(slurmrestd)):
        missing.append("slurmrestd ({})".format(slurmrestd))
    configured = PLUGIN_DIR_KEY.search(read_text(node, conf_path(node, "slurm.conf")) or "")
    directories = tuple(configured.group(1).split(":")) if configured else PLUGIN_DIRS
    if not any(node.path(d.rstrip("/") + "/auth_jwt.so").is_file() for d in directories):
        missing.append("the auth/jwt plugin (auth_jwt.so in {})".format(", ".join(directories)))
    return missing


class SlurmRestInstalled(Step):
    """This controller's Slurm has slurmrestd and auth/jwt. AWS does not say whether HyperPod's AMIs build them (no
    HyperPod page mentions slurmrestd); a build without them fails here, before any key is written, with the fix."""

    name = "rest-api-slurm-build"

    def needed(self, node: Node) -> bool:
        return bool(missing_pieces(node))

    def apply(self, node: Node) -> None:
        raise StepFailed(
            "rest_api is on, but this controller's Slurm has no {}. AWS does not document whether HyperPod's AMIs "
            "build Slurm's REST API. Fix: use an AMI whose Slurm has slurmrestd and auth/jwt (built with libjwt), "
            "or turn rest_api off".format(" and no ".join(missing_pieces(node)))
        )

    def describe(self, node: Node) -> List[str]:
        return ["fail: no " + piece for piece in missing_pieces(node)]


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

    def left_alone(self, node: Node) -> List[str]:
        return [AWS_SILENT]


AWS_SILENT = (
    "AWS documents no AuthAlt settings of HyperPod's slurm.conf and nothing of slurmrestd: the runtime puts "
    "AuthAltTypes=auth/jwt in accounting.conf, which HyperPod's slurm.conf includes and which the Merge strategy and "
    'continuous provisioning leave alone ("HyperPod only updates the partition-related sections of slurm.conf"); '
    "a HyperPod that rewrote it would turn the REST API's tokens off until the next bootstrap [inferred]"
)
"""Said by ``plan`` and logged by ``bootstrap`` (a ``left-alone`` line) on every HyperPod controller with rest_api."""


def key_steps(node: Node) -> List[Step]:
    """Before the Slurm daemons start: the key (and, on HyperPod, the ``auth/jwt`` keys in accounting.conf)."""
    if node.params.rest_api is None or not node.is_controller:
        return []
    return [SlurmRestInstalled(), JwtKey()] + ([] if node.platform == GENERIC else [SlurmAuthInclude()])
