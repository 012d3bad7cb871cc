"""``srun --auto-resume=1`` on the emulated HyperPod platform: a wrapper installed as ``/opt/slurm/bin/srun``.

On HyperPod, a SPANK plugin of its AMI adds ``--auto-resume`` to srun: when the step fails, the plugin asks
HyperPod's cluster agent to diagnose the step's nodes, the agent replaces the faulty ones, and the plugin runs
the step again inside the same job (docs/local-cluster.md, "Auto-resume"). A SPANK plugin must be compiled
against Slurm's headers; this emulation is a wrapper instead, with the same decisions:

* without ``--auto-resume=1`` (or outside an allocation) it execs the real srun, untouched;
* with it, it runs the real srun without the option; when the step fails, it writes a request naming the
  job's nodes to the emulated agent's mailbox (:mod:`hyperpod_local.agent`) and waits for the answer;
* on ``RETRYSTEP`` (the agent replaced a node of the job) it waits until every node of the allocation is
  back in Slurm and runs the step again, up to :data:`MAX_ATTEMPTS` times; on any other answer, on a
  cancelled step or when no agent answers, it exits with the step's status.

This file is copied to the node as a script of its own and runs on the node's system Python, so: stdlib
only, no import from ``hyperpod_cdk``. Its settings come from :data:`SETTINGS_PATH` (written at install).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

OPTION = "--auto-resume"
SETTINGS_PATH = "/opt/slurm/libexec/hyperpod-auto-resume.json"
"""``{"mailbox": DIR, "real_srun": PATH}``: where the agent's mailbox is and which srun is Slurm's."""
RETRYSTEP = "RETRYSTEP"
MAX_ATTEMPTS = 3
"""Step retries per srun (HyperPod does not document its limit)."""
ANSWER_TIMEOUT_S = 600.0
NODES_BACK_TIMEOUT_S = 600.0
STEP_END_GRACE_S = 10.0
POLL_S = 0.5
READY_STATES = ("allocated", "mixed", "completing")
"""``sinfo %T`` states of a node that is back in a running job's allocation (no ``*``: it responds)."""


class UsageError(ValueError):
    """A bad ``--auto-resume`` value; srun's own options are left to srun."""


def split_option(argv: Sequence[str]) -> tuple[bool, list[str]]:
    """(auto-resume on?, srun's arguments without the option). Only options before the command count."""
    enabled = False
    rest: list[str] = []
    index = 0
    args = list(argv)
    while index < len(args):
        arg = args[index]
        if not arg.startswith("-"):  # the command: everything from here is its own
            rest.extend(args[index:])
            break
        if arg == OPTION or arg.startswith(OPTION + "="):
            if arg == OPTION:
                if index + 1 >= len(args):
                    raise UsageError(f"{OPTION} needs a value: 0 or 1")
                value = args[index + 1]
                index += 1
            else:
                value = arg.split("=", 1)[1]
            if value not in ("0", "1"):
                raise UsageError(f"{OPTION}={value}: allowed values are 0 and 1")
            enabled = value == "1"
        else:
            rest.append(arg)
        index += 1
    return enabled, rest


def request_name(job_id: str, step_started: float, attempt: int) -> str:
    return f"{job_id}-{int(step_started * 1000)}-{attempt}.json"


def make_request(job_id: str, nodes: Sequence[str], step_started: float, exit_code: int) -> dict[str, Any]:
    """What the wrapper asks the agent after a failed step: diagnose these nodes."""
    return {"job_id": job_id, "nodes": list(nodes), "step_started": step_started, "exit_code": exit_code}


def next_action(exit_code: int, cancelled: bool, answer: dict[str, Any] | None, attempt: int) -> str:
    """``done`` (exit with the step's status) or ``retry``: the decision after one run of the step."""
    if exit_code == 0 or cancelled or answer is None or attempt >= MAX_ATTEMPTS:
        return "done"
    return "retry" if answer.get("action") == RETRYSTEP else "done"


def nodes_back(sinfo_output: str, nodes: Sequence[str]) -> bool:
    """Every node is in a running allocation and responding, per ``sinfo -h -N -o '%N %T'``."""
    states = {}
    for line in sinfo_output.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return bool(nodes) and all(states.get(node) in READY_STATES for node in nodes)


def say(job_id: str, step: str, message: str) -> None:
    sys.stderr.write(f"[Auto Resume] Info: JobID: {job_id} StepID: {step} {message}\n")
    sys.stderr.flush()


class Wrapper:
    def __init__(self, settings: dict[str, str], env: dict[str, str]) -> None:
        self.mailbox = settings["mailbox"]
        self.real_srun = settings["real_srun"]
        self.env = env
        self.cancelled = False
        self.child: subprocess.Popen[bytes] | None = None

    def slurm(self, argv: list[str]) -> str:
        """A Slurm query (scontrol, sinfo, squeue: none of them is wrapped) on the job's PATH."""
        result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env, check=False)
        return result.stdout.decode(errors="replace") if result.returncode == 0 else ""

    def job_nodes(self, job_id: str) -> list[str]:
        names = self.slurm(["scontrol", "show", "hostnames", self.env.get("SLURM_JOB_NODELIST", "")])
        return names.split() or self.slurm(["squeue", "-h", "-j", job_id, "-o", "%N"]).split()

    def _forward(self, signum: int, _frame: Any) -> None:
        self.cancelled = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def replaced_since(self, nodes: list[str], started: float) -> list[str]:
        """Nodes of the job the agent replaced after ``started`` (its ``replaced/<node>.json`` notices)."""
        found = []
        for node in nodes:
            try:
                with open(os.path.join(self.mailbox, "replaced", node + ".json")) as handle:
                    when = json.load(handle).get("time", 0)
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(when, (int, float)) and when >= started:
                found.append(node)
        return found

    def end_broken_step(self, job_id: str) -> None:
        """The step lost a node: its tasks elsewhere are killed and srun, which would wait for the lost task
        for ever, is stopped."""
        steps = self.slurm(["squeue", "-h", "-s", "-j", job_id, "-o", "%i"]).split()
        for step in steps:
            if step.split(".")[-1].isdigit():
                subprocess.run(["scancel", "--signal=KILL", step], env=self.env, check=False)
        if self.child is not None:
            try:
                self.child.wait(STEP_END_GRACE_S)
            except subprocess.TimeoutExpired:
                self.child.kill()

    def run_step(self, args: list[str], job_id: str, nodes: list[str], started: float) -> int:
        self.child = subprocess.Popen([self.real_srun, *args], env=self.env)
        while True:
            try:
                return self.child.wait(POLL_S)
            except subprocess.TimeoutExpired:
                lost = self.replaced_since(nodes, started)
                if lost:
                    say(job_id, "-", "Node {} was replaced: ending the step".format(",".join(lost)))
                    self.end_broken_step(job_id)
                    code = self.child.wait()
                    return code if code != 0 else 1
            except KeyboardInterrupt:
                continue

    def ask(self, request: dict[str, Any], name: str) -> dict[str, Any] | None:
        requests = os.path.join(self.mailbox, "requests")
        answers = os.path.join(self.mailbox, "answers")
        temporary = os.path.join(requests, "." + name)
        with open(temporary, "w") as handle:
            json.dump(request, handle)
        os.rename(temporary, os.path.join(requests, name))
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        path = os.path.join(answers, name)
        while time.monotonic() < deadline and not self.cancelled:
            try:
                with open(path) as handle:
                    data = json.load(handle)
                if isinstance(data, dict):
                    return data
            except (OSError, ValueError):
                pass
            time.sleep(POLL_S)
        return None

    def wait_back(self, nodes: list[str]) -> bool:
        deadline = time.monotonic() + NODES_BACK_TIMEOUT_S
        while time.monotonic() < deadline and not self.cancelled:
            if nodes_back(self.slurm(["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N %T"]), nodes):
                return True
            time.sleep(POLL_S)
        return False

    def main(self, args: list[str]) -> int:
        job_id = self.env["SLURM_JOB_ID"]
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(signum, self._forward)
        attempt = 0
        nodes = self.job_nodes(job_id)
        while True:
            started = time.time()
            # A step that lost a node stays on record until the job ends: the retry shares its resources.
            code = self.run_step(args if attempt == 0 else ["--overlap", *args], job_id, nodes, started)
            step = f"{attempt}"
            answer = None
            if code != 0 and not self.cancelled and attempt < MAX_ATTEMPTS:
                say(job_id, step, "Initiating communication with cluster agent to diagnose health of nodes")
                name = request_name(job_id, started, attempt)
                answer = self.ask(make_request(job_id, nodes, started, code), name)
                say(job_id, step, "Response from cluster agent: JobId={}, ResumeAction={}".format(
                    job_id, (answer or {}).get("action", "NONE")))  # fmt: skip
            if next_action(code, self.cancelled, answer, attempt) == "done":
                return code
            say(job_id, step, "Job failed - replaced nodes {}".format(",".join((answer or {}).get("replaced", []))))
            if not self.wait_back(nodes):
                return code
            attempt += 1
            say(job_id, step, "Updating to new node list {}".format(",".join(nodes)))
            say(job_id, step, f"Retrying step. Attempt number: {attempt}")


def load_settings(path: str = SETTINGS_PATH) -> dict[str, str]:
    with open(path) as handle:
        data = json.load(handle)
    return {"mailbox": str(data["mailbox"]), "real_srun": str(data["real_srun"])}


def main(argv: Sequence[str]) -> int:
    try:
        settings = load_settings()
    except (OSError, ValueError, KeyError) as error:
        sys.stderr.write(f"srun (hyperpod-cdk auto-resume wrapper): {SETTINGS_PATH}: {error}\n")
        return 1
    try:
        enabled, args = split_option(argv)
    except UsageError as error:
        sys.stderr.write(f"srun: error: {error}\n")
        return 1
    env = dict(os.environ)
    if not enabled or not env.get("SLURM_JOB_ID"):
        os.execv(settings["real_srun"], [settings["real_srun"], *args])
    return Wrapper(settings, env).main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
