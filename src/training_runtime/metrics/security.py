"""The Slurm security gate's node metric: is a Slurm release the cluster runs affected by a known advisory.

Runs on the controller from the metrics collector (:mod:`.collect`), beside the Slurm metrics. It reads the releases
running: ``sinfo --version`` (the controller's Slurm) and ``sinfo -h -N -o %N|%v`` (each node's slurmd, as slurmctld
last heard it), and judges each with :func:`training_runtime.slurm_security.verdict`, the table ``validate``,
``plan`` and ``status --slurm`` read. The alarm ``SlurmSecurityAffected``
(:mod:`hyperpod_cdk.constructs.alert_rules`) fires while a release is affected. Stdlib only; imports no bootstrap
machinery.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence

from training_runtime.metrics.exposition import Family
from training_runtime.slurm_security import verdict

AFFECTED = "slurm_security_affected"
CVES = "slurm_security_cves"
METRIC_NAMES = (AFFECTED, CVES)
VERSION = ["sinfo", "--version"]
NODE_VERSIONS = ["sinfo", "-h", "-N", "-o", "%N|%v"]

Run = Callable[[Sequence[str]], str]
"""Runs a command and returns its stdout; raises on failure."""


def _try(run: Run, argv: Sequence[str]) -> Optional[str]:
    try:
        return run(argv)
    except Exception:
        return None


def running_versions(run: Run) -> Dict[str, int]:
    """Each Slurm release running -> how many nodes run it (the controller's own counts as one, its slurmd too)."""
    found: Dict[str, int] = {}
    own = _try(run, VERSION)
    if own is not None and own.strip():
        found[own.strip().splitlines()[0]] = 1
    listed = _try(run, NODE_VERSIONS)
    seen = set()
    for line in (listed or "").splitlines():
        name, _, version = line.strip().partition("|")
        if not name or not version or name in seen or version in ("N/A", "(null)"):
            continue  # sinfo -N lists a node once per partition; a node not yet registered has no version
        seen.add(name)
        found[version] = found.get(version, 0) + 1
    return found


def security_families(run: Run) -> List[Family]:
    """``slurm_security_affected{version,cves,fixed_by}`` (1 affected, 0 not) and ``slurm_security_cves{version}``
    for each release running; nothing for a version the table cannot read."""
    affected = Family(
        AFFECTED,
        "1 for each Slurm release running on the cluster that a known security advisory affects, else 0 "
        "(training_runtime.slurm_security; docs/operations.md, Slurm security releases)",
    )
    cves = Family(CVES, "Known CVEs affecting each Slurm release running on the cluster")
    for text in running_versions(run):
        try:
            answer = verdict(text)
        except ValueError:
            continue
        version = str(answer.release)
        affected.set(
            1 if answer.affected else 0, version=version, cves=",".join(answer.cves), fixed_by=answer.fixed_by()
        )
        cves.set(len(answer.cves), version=version)
    return [affected, cves]
