"""A hostile user's first try on a local cluster: the instance role's credentials from the metadata service.

:func:`credentials_as` asks the cluster's metadata service for the role's credentials as a given user on a given
node, from a shell (a logged-in user) or inside a Slurm job (``srun`` or ``sbatch`` submitted from another node), the
way any process would (IMDSv2: a token, the role's name, its keys), and returns what came back. The local cluster's
metadata service is the emulator's (``hyperpod_local.imds``, at the address the nodes' parameters name); with the
emulated control plane running it serves real role keys. Used by tests/test_local_imds.py and the hostile-user drill.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from hyperpod_local import LocalCluster
from hyperpod_local.imds import CREDENTIALS_PATH, imds_url

PROBE = f"""
import json, sys, urllib.error, urllib.request
base = sys.argv[1]
def ask(path, headers, method="GET"):
    request = urllib.request.Request(base + path, headers=headers, method=method)
    return urllib.request.urlopen(request, timeout=5).read().decode()
try:
    token = ask("/latest/api/token", {{"X-aws-ec2-metadata-token-ttl-seconds": "60"}}, "PUT")
    role = ask({CREDENTIALS_PATH!r}, {{"X-aws-ec2-metadata-token": token}}).strip()
    keys = json.loads(ask({CREDENTIALS_PATH!r} + role, {{"X-aws-ec2-metadata-token": token}}))
    found = {{"outcome": "credentials" if keys.get("AccessKeyId") else "no-credentials", "detail": role}}
except urllib.error.HTTPError as error:
    found = {{"outcome": "http-error", "detail": str(error.code)}}
except (urllib.error.URLError, OSError) as error:
    reason = str(getattr(error, "reason", error))
    found = {{"outcome": "refused" if "refused" in reason.lower() else "error", "detail": reason}}
print(json.dumps(found))
"""
"""Prints one JSON line: ``outcome`` is ``credentials`` (the role's keys came back), ``refused`` (the connection was
refused: the owner rule), ``http-error`` (the service answered with an error, e.g. 404 without the control plane),
``no-credentials`` or ``error`` (anything else, e.g. a timeout); ``detail`` says more. Stdlib only."""
PROBE_DIR = "imds-probe"
"""Under the shared directory (``/fsx`` on the nodes): the probe and the batch jobs' output."""


@dataclass(frozen=True)
class Outcome:
    """What one try got."""

    outcome: str
    detail: str
    output: str
    """The command's whole output, for an assertion's message."""

    @property
    def got_credentials(self) -> bool:
        return self.outcome == "credentials"


def _parse(stdout: str, stderr: str) -> Outcome:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if not lines:
        return Outcome("error", "no answer from the probe", stdout + stderr)
    found = json.loads(lines[-1])
    return Outcome(found["outcome"], found["detail"], stdout + stderr)


def _shared_probe(cluster: LocalCluster) -> str:
    """The probe as a file on the shared directory (root's, readable by all); its path on the nodes."""
    mount = cluster.state.fsx_mount_path
    host = Path(cluster.workdir) / "shared" / PROBE_DIR
    host.mkdir(mode=0o1777, exist_ok=True)
    host.chmod(0o1777)
    (host / "probe.py").write_text(PROBE)
    return f"{mount}/{PROBE_DIR}/probe.py"


def credentials_as(
    cluster: LocalCluster, node: str, user: str, *, via: str = "shell", submit_from: str | None = None
) -> Outcome:
    """Ask for the role's credentials as ``user`` on ``node``: ``via`` ``shell`` (a process of a logged-in user or
    root, ``runuser``), ``srun`` or ``sbatch`` (a job step or batch job placed on ``node``, submitted as ``user`` on
    ``submit_from``, default ``node``). ``user`` ``root`` runs as root (shell only)."""
    url = imds_url(cluster.layout.subnet)
    as_user = [] if user == "root" else ["runuser", "-u", user, "--"]
    if via == "shell":
        done = cluster.exec(node, [*as_user, "python3", "-c", PROBE, url], timeout=60)
        return _parse(done.stdout, done.stderr)
    probe = _shared_probe(cluster)
    where = ["-N1", "-w", cluster.slurm_name(node)]
    origin = submit_from or node
    if via == "srun":
        done = cluster.exec(origin, [*as_user, "srun", *where, "python3", probe, url], timeout=120)
        return _parse(done.stdout, done.stderr)
    if via == "sbatch":
        output = f"{Path(probe).parent}/{uuid.uuid4().hex}.out"
        script = f"#!/bin/sh\nexec python3 {probe} {url}\n"
        argv = [*as_user, "sbatch", "--wait", "--parsable", *where, "-o", output]
        done = cluster.exec(origin, argv, input=script, timeout=180)
        written = Path(cluster.workdir) / "shared" / PROBE_DIR / Path(output).name
        text = written.read_text() if written.exists() else ""
        return _parse(text, done.stdout + done.stderr)
    raise ValueError(f"via: got {via!r}; allowed: shell, srun, sbatch")
