"""pam_slurm_adopt on compute nodes only: a user reaches a compute node by SSH only into a job of theirs (issue #41).

Slurm's page (https://slurm.schedmd.com/pam_slurm_adopt.html) sets the conditions, and the step checks each on the
node before it touches PAM: "PrologFlags=contain must be set in the slurm.conf", "pam_slurm_adopt must be used with
the task/cgroup task plugin and the proctrack/cgroup proctrack plugin", and "The pam_systemd module will conflict
with pam_slurm_adopt, so you need to disable it in all files that are included in sshd". It reads Slurm's settings
from ``scontrol show config`` (what slurmctld runs with, HyperPod's slurm.conf or ours alike) and never edits
slurm.conf: where a condition fails it leaves PAM as it is and says which (``left_alone``), because a module that
cannot adopt would either lock users out or let them in unconfined. Login nodes and the controller never get it:
there users have no job, and the module denies a user with no job ("action_no_jobs ... deny (default)").
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from training_runtime.files import read_text, write_file
from training_runtime.node import Node
from training_runtime.render.sssd_conf import ADOPT_LINE, sshd_pam_with_adopt
from training_runtime.steps import Step

SSHD_PAM = "/etc/pam.d/sshd"
MODULE_DIRS = (
    "/lib/x86_64-linux-gnu/security",
    "/usr/lib/x86_64-linux-gnu/security",
    "/lib/aarch64-linux-gnu/security",
    "/usr/lib/aarch64-linux-gnu/security",
    "/lib/security",
    "/lib64/security",
)
"""Where PAM loads a module named without a path (Debian and Ubuntu's multiarch directories first)."""
_SETTING = re.compile(r"^(\w+)\s*=\s*(.*)$")


def slurm_settings(text: str) -> Dict[str, str]:
    """``scontrol show config``'s ``Key = value`` lines."""
    found = {}
    for line in text.splitlines():
        match = _SETTING.fullmatch(line.strip())
        if match:
            found[match.group(1)] = match.group(2).strip()
    return found


def unmet(settings: Dict[str, str]) -> List[str]:
    """The pam_slurm_adopt conditions Slurm's running configuration does not meet."""
    problems = []
    if "contain" not in settings.get("PrologFlags", "").lower():
        problems.append("PrologFlags has no Contain (got {!r})".format(settings.get("PrologFlags", "")))
    if settings.get("ProctrackType") != "proctrack/cgroup":
        problems.append("ProctrackType is {!r}, not proctrack/cgroup".format(settings.get("ProctrackType", "")))
    if "task/cgroup" not in settings.get("TaskPlugin", ""):
        problems.append("TaskPlugin {!r} lacks task/cgroup".format(settings.get("TaskPlugin", "")))
    return problems


class PamSlurmAdopt(Step):
    name = "pam-slurm-adopt"

    def _module(self, node: Node) -> Optional[str]:
        return next((d for d in MODULE_DIRS if node.path(d + "/pam_slurm_adopt.so").exists()), None)

    def why_not(self, node: Node) -> Optional[str]:
        """Why the node keeps its sshd PAM stack (None: the module goes in)."""
        if self._module(node) is None:
            return "pam_slurm_adopt.so is not installed (it must match the node's Slurm version)"
        if node.which("sshd", ["/usr/sbin"]) is None:
            return "sshd is not installed"
        result = node.run([node.slurm.command("scontrol"), "show", "config"], check=False, timeout=60)
        if not result.ok:
            return "scontrol show config failed (slurmctld not answering)"
        problems = unmet(slurm_settings(result.stdout))
        if problems:
            return "Slurm's configuration does not meet Slurm's conditions for it: " + "; ".join(problems)
        return None

    def needed(self, node: Node) -> bool:
        if self.why_not(node) is not None:
            return False
        text = read_text(node, SSHD_PAM) or ""
        return text != sshd_pam_with_adopt(text) or "pam_systemd.so" in (
            read_text(node, "/etc/pam.d/common-session") or ""
        )

    def apply(self, node: Node) -> None:
        if "pam_systemd.so" in (read_text(node, "/etc/pam.d/common-session") or ""):
            node.run(["pam-auth-update", "--disable", "systemd"], env={"DEBIAN_FRONTEND": "noninteractive"}, timeout=60)
        text = read_text(node, SSHD_PAM) or ""
        write_file(node, SSHD_PAM, sshd_pam_with_adopt(text), mode=0o644)

    def describe(self, node: Node) -> List[str]:
        return ["append to {}: {}".format(SSHD_PAM, ADOPT_LINE), "pam-auth-update --disable systemd"]

    def left_alone(self, node: Node) -> List[str]:
        why = self.why_not(node)
        if why is None:
            return []
        return [
            "pam_slurm_adopt not set up, so a directory user may SSH to any compute node: {} (docs/directory.md, "
            '"pam_slurm_adopt")'.format(why)
        ]
