"""The keys that turn on Slurm's ``auth/jwt`` for the REST API: one definition for slurm.conf (generic), the
``accounting.conf`` block HyperPod's slurm.conf includes, and slurmdbd.conf.

SchedMD, jwt.html ("Setup for Standalone Use"): "Add JWT as an alternative authentication in slurm.conf and
slurmdbd.conf: ``AuthAltTypes=auth/jwt`` ``AuthAltParameters=jwt_key=/var/spool/slurm/statesave/jwt_hs256.key``";
rest.html: "When using JWT, it is important that AuthAltTypes=auth/jwt be configured in both your slurm.conf and
slurmdbd.conf for slurmrestd." Only slurmctld and slurmdbd load the alternative types (24.11's ``auth_g_init`` reads
``AuthAltTypes`` in those two daemons only), so the keys are harmless in the copy configless nodes get.

slurm.conf also gets ``disable_token_creation`` (slurm.conf(5), AuthAltParameters: "Disable "scontrol token" use by
non-SlurmUser accounts"): tokens come from the IAM-authorized minting function only, so a user with a shell on the
cluster cannot mint a long-lived token for themselves. slurmdbd.conf(5) lists only ``jwks=`` and ``jwt_key=`` there.
"""

from __future__ import annotations

import re
from typing import List, Tuple

JWT_KEY_DIR = "/var/spool/slurm-jwt"
"""On the controller's own disk, owned by SlurmUser, 0700: jwt.html, "The key should not be placed in a directory where
non-admin users might be able to access it"; slurm.conf(5), AuthAltTypes: "It is not suggested to place the
jwt_hs256.key on any nodes other than the machine running slurmctld and the machine running slurmdbd" (each controller
fetches its own copy from Secrets Manager, so no shared directory is needed)."""
JWT_KEY_PATH = JWT_KEY_DIR + "/jwt_hs256.key"
KEY_PATH = re.compile(r"^/[A-Za-z0-9._/-]+\Z")
"""An AuthAltParameters path: absolute, and none of the ',' '=' '#' or spaces Slurm's option parser splits on."""


def jwt_keys(key_path: str = JWT_KEY_PATH, slurmdbd: bool = False) -> List[Tuple[str, str]]:
    """(key, value) of the ``auth/jwt`` lines for slurm.conf, or for slurmdbd.conf with ``slurmdbd``."""
    if not KEY_PATH.match(key_path):
        raise ValueError(
            "jwt key path: got {!r}; expected an absolute path of letters, digits, '.', '_', '-' and '/'".format(
                key_path
            )
        )
    parameters = "jwt_key={}".format(key_path) + ("" if slurmdbd else ",disable_token_creation")
    return [("AuthAltTypes", "auth/jwt"), ("AuthAltParameters", parameters)]


def jwt_lines(key_path: str = JWT_KEY_PATH, slurmdbd: bool = False) -> str:
    """:func:`jwt_keys` as configuration lines, with a comment that says why."""
    lines = ["# Slurm's REST API: JSON Web Tokens signed with the key from Secrets Manager (hyperpod-cdk rest_api)."]
    lines += ["{}={}".format(key, value) for key, value in jwt_keys(key_path, slurmdbd)]
    return "\n".join(lines) + "\n"
