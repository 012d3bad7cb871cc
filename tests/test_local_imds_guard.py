"""The metadata service's firewall rules with the real iptables, in a network namespace of their own (root only; no
cluster): EC2's two addresses on the namespace's loopback, a metadata stand-in listening on each, and the rules of
``training_runtime.imds_guard``. Root gets an answer, another user is refused at once, a member of an allowed group
(primary or supplementary) gets one; the rules converge from any state the node may be found in, and the boot program
puts them back. Alone: ``python -m pytest tests/test_local_imds_guard.py`` (about 5 s)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from training_runtime.hyperpod_facts import IMDS_ENDPOINT_IPV6
from training_runtime.imds_guard import CHAIN, IPV4, IPV6, Guard, Tables, Target, converge, converged, found
from training_runtime.run import Result, Runner

pytestmark = [
    pytest.mark.local(root_only=True),
    pytest.mark.skipif(shutil.which("iptables") is None, reason="needs iptables (sudo make system-packages)"),
]

V4, V6 = "169.254.169.254", IMDS_ENDPOINT_IPV6
PYTHON = "/usr/bin/python3"
"""The system's Python: another user can run it (a virtualenv under root's home may not be readable)."""
ALLOWED_GID, OTHER_GID, NOBODY = 4242, 4343, 65534
PROBE = """
import sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=3).status)
except urllib.error.URLError as error:
    print("refused" if "refused" in str(error.reason).lower() else "error: {}".format(error.reason))
"""
FULL = Guard((Target(IPV4, V4), Target(IPV6, V6)), (ALLOWED_GID,))


class Netns:
    """A named network namespace: commands run in it as root, or as another user through setpriv."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.runner = Runner()

    def run(self, argv: list[str], **options: Any) -> Result:
        return self.runner.run(["ip", "netns", "exec", self.name, *argv], **options)

    def tables(self, family: str) -> Tables:
        """The family's programs, run inside this namespace (``ip netns exec`` in front)."""
        prefix = "ip6" if family == IPV6 else "ip"
        return Tables(family, f"{prefix}tables", f"{prefix}tables-restore")

    def get(self, url: str, uid: int = 0, gid: int = 0, groups: tuple[int, ...] = ()) -> str:
        """What a request to ``url`` gets as ``uid``: the HTTP status, ``refused`` or the error."""
        who = []
        if uid:
            extra = ["--groups", ",".join(map(str, groups))] if groups else ["--clear-groups"]
            who = ["setpriv", f"--reuid={uid}", f"--regid={gid}", *extra]
        return self.run([*who, PYTHON, "-c", PROBE, url], check=False, timeout=30).stdout.strip()


class NetnsRunner:
    """``node.run``'s shape for :func:`converge`: the namespace's runner, its commands wrapped."""

    def __init__(self, netns: Netns) -> None:
        self.netns = netns

    def __call__(self, argv: list[str], **options: Any) -> Result:
        return self.netns.run(argv, **options)


@pytest.fixture
def netns() -> Iterator[Netns]:
    name = f"hpimds{os.getpid() % 10000}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    space = Netns(name)
    servers: list[subprocess.Popen[bytes]] = []
    try:
        space.run(["ip", "link", "set", "lo", "up"])
        space.run(["ip", "addr", "add", f"{V4}/32", "dev", "lo"])
        space.run(["ip", "-6", "addr", "add", f"{V6}/128", "dev", "lo", "nodad"])
        for address in (V4, V6):
            argv = ["ip", "netns", "exec", name, PYTHON, "-m", "http.server", "--bind", address, "80"]
            servers.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for url in (f"http://{V4}/", f"http://[{V6}]/"):
            deadline = time.monotonic() + 10
            while space.get(url) != "200" and time.monotonic() < deadline:
                time.sleep(0.1)
        yield space
    finally:
        for server in servers:
            server.terminate()
            server.wait(10)
        subprocess.run(["ip", "netns", "delete", name], check=False)


def urls() -> tuple[str, str]:
    return f"http://{V4}/", f"http://[{V6}]/"


def test_root_and_an_allowed_group_reach_the_metadata_service_and_no_one_else(netns: Netns) -> None:
    run = NetnsRunner(netns)
    for url in urls():  # before: everyone reaches it (H1)
        assert netns.get(url, NOBODY, NOBODY) == "200"
    for family in (IPV4, IPV6):
        assert converge(run, netns.tables(family), FULL)
    for url in urls():
        assert netns.get(url) == "200", "root"
        assert netns.get(url, NOBODY, NOBODY) == "refused", "another user"
        assert netns.get(url, NOBODY, NOBODY, (OTHER_GID,)) == "refused", "a member of another group"
        assert netns.get(url, NOBODY, NOBODY, (ALLOWED_GID,)) == "200", "a supplementary member of the allowed group"
        assert netns.get(url, NOBODY, ALLOWED_GID) == "200", "a process whose primary group is the allowed one"


def test_the_rules_converge_from_what_a_node_may_hold_and_then_change_nothing(netns: Netns) -> None:
    run, v4 = NetnsRunner(netns), netns.tables(IPV4)
    assert not converged(run, v4, FULL)
    assert converge(run, v4, FULL) and converged(run, v4, FULL)
    assert not converge(run, v4, FULL), "a second run changes nothing"
    # Another rule put before ours (a firewall manager's ACCEPT): users get through until our jump is first again.
    netns.run(["iptables", "-w", "-I", "OUTPUT", "1", "-d", f"{V4}/32", "-j", "ACCEPT"])
    assert netns.get(urls()[0], NOBODY, NOBODY) == "200"
    assert not converged(run, v4, FULL), "a jump that is no longer first counts as not in place"
    assert converge(run, v4, FULL) and found(run, v4).jumps == (1,)
    assert netns.get(urls()[0], NOBODY, NOBODY) == "refused", "the ACCEPT put first no longer lets users through"
    # An extra rule in our chain and a second jump: put right in one restore.
    netns.run(["iptables", "-w", "-I", CHAIN, "1", "-j", "RETURN"])
    netns.run(["iptables", "-w", "-A", "OUTPUT", *Target(IPV4, V4).jump()])
    assert not converged(run, v4, FULL)
    assert converge(run, v4, FULL)
    state = found(run, v4)
    assert state.jumps == (1,) and state.chain is not None and len(state.chain) == 3
    assert netns.get(urls()[0], NOBODY, NOBODY) == "refused"
    # The allowed groups change: the chain follows.
    fewer = Guard(FULL.targets, ())
    assert not converged(run, v4, fewer) and converge(run, v4, fewer)
    assert netns.get(urls()[0], NOBODY, ALLOWED_GID) == "refused"
    # Off (no target): our jump and chain go, the other rule stays.
    off = Guard(())
    assert converge(run, v4, off) and converged(run, v4, off)
    listing = netns.run(["iptables", "-w", "-S"]).stdout
    assert CHAIN not in listing and f"-A OUTPUT -d {V4}/32 -j ACCEPT" in listing
    assert not converge(run, v4, off)


def test_the_boot_program_puts_the_rules_back_from_the_guard_file(netns: Netns, tmp_path: Path) -> None:
    """What a reboot runs (systemd's unit, or the local cluster's boot record): ``--apply`` on the file the
    bootstrap step wrote, in a namespace that has lost every rule."""
    guard_file = tmp_path / "imds-guard.json"
    tables = [netns.tables(IPV4), netns.tables(IPV6)]
    guard_file.write_text(json.dumps(FULL.to_json(tables)))
    src = str(Path(__file__).resolve().parent.parent / "src")
    argv = ["env", f"PYTHONPATH={src}", PYTHON, "-m", "training_runtime.imds_guard", "--apply", str(guard_file)]
    done = netns.run(argv, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["changed"] == [IPV4, IPV6]
    for url in urls():
        assert netns.get(url, NOBODY, NOBODY) == "refused"
    again = netns.run(argv, timeout=60)
    assert json.loads(again.stdout.splitlines()[-1])["changed"] == []
    guard_file.write_text("{}")
    broken = netns.run(argv, check=False, timeout=60)
    assert broken.returncode == 1 and "not a guard" in broken.stderr
