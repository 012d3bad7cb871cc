"""Nodes as Linux namespaces on this machine: create, exec, crash, boot, destroy (root only).

One node = new net, uts, mount, pid, ipc and time namespaces whose PID 1 is ``node_init.sh`` (an overlay
root over the host's ``/`` or a node root file system, see that script). Nodes are wired with one veth
pair each to a bridge that lives in a dedicated "switch" network namespace, so the host's own network
namespace gains nothing: no bridge, no address, no route. Nodes have no default route, so no traffic leaves the cluster.

Names are prefixed (switch ``<prefix>-sw``, node netns ``<prefix>-<node>``), so clusters with different
prefixes can run side by side. docs/research/local-slurm.md is the verified recipe this follows; its
pitfalls are cited as P<n>.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hyperpod_local.bridge import BRIDGE
from hyperpod_local.paths import NODE_INIT
from hyperpod_local.procs import children, is_zombie, reap, start_ticks

DEFAULT_PREFIX = "hpcdk"
READY_MARKER = "hpcdk-node-ready"
NODE_PATH = "/opt/slurm/bin:/opt/slurm/sbin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH of commands run on a node: a root login shell's, with HyperPod's /opt/slurm first."""
START_TIMEOUT_S = 20.0
DEFAULT_EXEC_TIMEOUT_S = 600.0


class NamespaceError(RuntimeError):
    """A node could not be created, reached or removed; the message says which and why."""


@dataclass(frozen=True)
class NodeNet:
    """What a node needs to be started: its name, address and host name (default: its name)."""

    name: str
    ip: str
    hostname: str | None = None


@dataclass(frozen=True)
class InitRecord:
    """How to find a running node's PID 1 again, from any process (kept in ``<node dir>/init.json``)."""

    pid: int
    """PID 1 of the node, as the host sees it."""
    start_ticks: int
    """Its start time (``/proc/<pid>/stat`` field 22): guards against a reused PID."""
    pid_ns: str
    """``pid:[inode]`` of the node's PID namespace: which host processes belong to the node."""
    launcher_pid: int
    """The ``unshare`` process whose child PID 1 is."""


def node_init_text() -> str:
    """The packaged ``node_init.sh``."""
    return NODE_INIT.read_text()


def require_root() -> None:
    if os.geteuid() != 0:
        raise NamespaceError(
            "the local cluster needs root (CAP_SYS_ADMIN for mounts and namespaces, CAP_NET_ADMIN for the "
            "network); run it as root, e.g. with sudo, in a VM or a --privileged container"
        )


class Namespaces:
    """The namespaces of one cluster's nodes.

    :param workdir: per-node directories live in ``<workdir>/nodes/<name>`` (``upper`` is the node's disk).
    :param shared_dir: bind-mounted at ``fsx_mount_path`` in every node.
    :param hosts_file: copied to a node's ``/etc/hosts`` on its first boot.
    :param subnet: the nodes' network (their addresses carry its prefix length).
    :param prefix: of the switch and node netns names.
    :param lower: the nodes' root file system (the overlay's lower layer); the host's ``/`` when None.
    :param binds: host paths every node sees read-only at the same path.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        shared_dir: Path,
        fsx_mount_path: str,
        hosts_file: Path,
        subnet: str,
        prefix: str = DEFAULT_PREFIX,
        lower: Path | None = None,
        binds: Sequence[str] = (),
    ) -> None:
        self.workdir = workdir
        self.shared_dir = shared_dir
        self.fsx_mount_path = fsx_mount_path
        self.hosts_file = hosts_file
        self.network = ipaddress.IPv4Network(subnet)
        self.prefix = prefix
        self.lower = lower
        self.binds = tuple(binds)
        self._launchers: dict[str, subprocess.Popen[bytes]] = {}

    # --- names ------------------------------------------------------------------------------
    @property
    def switch(self) -> str:
        return f"{self.prefix}-sw"

    def netns(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def node_dir(self, name: str) -> Path:
        return self.workdir / "nodes" / name

    def _veth(self, ip: str) -> str:
        """The switch-side end of a node's cable, named by the address's index in the subnet (< 16 chars)."""
        return f"v{int(ipaddress.IPv4Address(ip)) - int(self.network.network_address)}"

    # --- switch -----------------------------------------------------------------------------
    def create_switch(self) -> None:
        """The switch netns with its bridge (idempotent)."""
        if self.switch in list_netns():
            return
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "set", "lo", "up")
        # A fixed MAC: a Linux bridge without one takes the lowest of its ports' MACs, so a node joining or leaving
        # changed the MAC behind the bridge's own addresses (the control plane's, the metadata service's), and a
        # node's ARP entry for them then pointed at a gone port for 15-45 s (docs/local-cluster.md, "The bridge's
        # MAC").
        bridge_mac = mac_of(str(self.network.network_address))
        _ip("-n", self.switch, "link", "add", BRIDGE, "address", bridge_mac, "type", "bridge")
        _ip("-n", self.switch, "link", "set", BRIDGE, "up")

    def delete_switch(self) -> None:
        if self.switch in list_netns():
            _ip("netns", "delete", self.switch, check=False)

    # --- node lifecycle ---------------------------------------------------------------------
    def start(self, node: NodeNet) -> InitRecord:
        """Power a node on: new namespaces over its disk (kept from an earlier run), then its cable."""
        if self.record(node.name) is not None:
            raise NamespaceError(f"node {node.name} is already running")
        self._unplug(node)
        directory = self.node_dir(node.name)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "init.json").unlink(missing_ok=True)
        log_path = directory / "init.log"
        script = self._install_init_script()
        # Time namespace: the node's uptime starts near 1 s, so every boot reports a fresh BootTime to
        # slurmctld (docs/research/local-slurm.md §6.4, P11).
        uptime = int(float(Path("/proc/uptime").read_text().split()[0]))
        argv = [
            "unshare",
            "--net",
            "--uts",
            "--mount",
            "--pid",
            "--ipc",
            "--time",
            f"--boottime={-(uptime - 1)}",
            "--fork",
            "--kill-child",  # if the launcher dies first, PID 1 (and so the whole node) dies with it
            "--propagation",
            "private",
            "bash",
            str(script),
            node.hostname or node.name,
            str(directory),
            str(self.shared_dir),
            self.fsx_mount_path,
            str(self.hosts_file),
            str(self.lower or "/"),
            *self.binds,
        ]
        with log_path.open("wb") as log:
            launcher = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={"PATH": NODE_PATH, "LANG": "C.UTF-8"},
            )
        self._launchers[node.name] = launcher
        try:
            record = self._await_init(node.name, launcher, log_path)
            self._plug(node, record.pid)
        except BaseException:
            if launcher.poll() is None:
                launcher.kill()
            self.crash(node)
            raise
        return record

    def _install_init_script(self) -> Path:
        """``node_init.sh`` as a file of its own in the work directory (the package may be a zip). Replaced
        by rename only when it changed: a running PID 1 keeps reading its own copy."""
        path = self.workdir / "nodes" / "node_init.sh"
        text = node_init_text()
        if not path.exists() or path.read_text() != text:
            temporary = path.with_name(f".node_init.{os.getpid()}.sh")
            temporary.write_text(text)
            os.replace(temporary, path)
        return path

    def _await_init(self, name: str, launcher: subprocess.Popen[bytes], log_path: Path) -> InitRecord:
        deadline = time.monotonic() + START_TIMEOUT_S
        pid = 0
        while time.monotonic() < deadline:
            if launcher.poll() is not None:
                raise NamespaceError(f"node {name} failed to start: {_tail(log_path)}")
            if not pid:
                kids = children(launcher.pid)
                pid = kids[0] if kids else 0
            if pid and READY_MARKER in log_path.read_text(errors="replace"):
                record = InitRecord(
                    pid=pid,
                    start_ticks=start_ticks(pid),
                    pid_ns=os.readlink(f"/proc/{pid}/ns/pid"),
                    launcher_pid=launcher.pid,
                )
                (self.node_dir(name) / "init.json").write_text(json.dumps(record.__dict__) + "\n")
                return record
            time.sleep(0.005)
        raise NamespaceError(f"node {name} did not come up within {START_TIMEOUT_S:.0f} s: {_tail(log_path)}")

    def _plug(self, node: NodeNet, pid: int) -> None:
        netns, veth = self.netns(node.name), self._veth(node.ip)
        _ip("netns", "attach", netns, str(pid))
        # A stable MAC per address, as an ENI keeps its MAC across reboots: peers' ARP caches stay right.
        mac = mac_of(node.ip)
        _ip(
            "-n", self.switch, "link", "add", veth, "type", "veth",
            "peer", "name", "eth0", "address", mac, "netns", netns,
        )  # fmt: skip
        _ip("-n", self.switch, "link", "set", veth, "master", BRIDGE, "up")
        _ip("-n", netns, "addr", "add", f"{node.ip}/{self.network.prefixlen}", "dev", "eth0")
        _ip("-n", netns, "link", "set", "eth0", "up")

    def _unplug(self, node: NodeNet) -> None:
        """Pull the cable and forget the netns name (both may be left over from an earlier run)."""
        if self.switch in list_netns():
            _ip("-n", self.switch, "link", "del", self._veth(node.ip), check=False)
        if self.netns(node.name) in list_netns():
            _ip("netns", "delete", self.netns(node.name), check=False)

    def crash(self, node: NodeNet, timeout: float = 10.0) -> None:
        """Power off without warning: SIGKILL PID 1 (the kernel kills every process of the node), pull the
        cable, delete the netns. The disk (``upper``) stays. A node that is not running is left as it is."""
        record = self.record(node.name)
        if record is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(record.pid, signal.SIGKILL)
        self._unplug(node)
        launcher = self._launchers.pop(node.name, None)
        if launcher is not None:
            # Reap it (P16); a launcher started by another process is reaped by the host's init.
            try:
                launcher.wait(timeout)
            except subprocess.TimeoutExpired:
                launcher.kill()
                launcher.wait(timeout)
        elif record is not None:
            # Started by this process through another handle (a cluster opened again, e.g. to take down a
            # failed `up`): reap it by its pid, or a long-lived caller keeps a zombie per node.
            reap(record.launcher_pid, timeout)
        if record is not None:
            _wait_gone(record, timeout)
        (self.node_dir(node.name) / "init.json").unlink(missing_ok=True)
        remove_cgroups(node.name)

    def destroy_all(self, nodes: Iterable[NodeNet]) -> None:
        """Crash every node and delete the switch: no process, netns or mount of the cluster is left."""
        for node in nodes:
            self.crash(node)
        self.delete_switch()

    # --- state ------------------------------------------------------------------------------
    def record(self, name: str) -> InitRecord | None:
        """The running node's PID 1, or None when the node is not running."""
        path = self.node_dir(name) / "init.json"
        try:
            record = InitRecord(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        try:
            if start_ticks(record.pid) != record.start_ticks or is_zombie(record.pid):
                return None
        except OSError:
            return None
        return record

    def alive(self, name: str) -> bool:
        return self.record(name) is not None

    def processes(self, record: InitRecord) -> list[int]:
        """Host PIDs of every process in the node's PID namespace (alive or not yet reaped)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if os.readlink(entry / "ns" / "pid") == record.pid_ns and not is_zombie(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found

    # --- exec -------------------------------------------------------------------------------
    def command(self, name: str, argv: Sequence[str], cwd: str | None = None) -> list[str]:
        """``argv`` as a command that runs on the node (like ``ssh node argv``)."""
        record = self.record(name)
        if record is None:
            raise NamespaceError(f"node {name} is not running (crashed or never started); boot it first")
        enter = ["nsenter", "-t", str(record.pid), "-m", "-u", "-n", "-p", "-i", "-T", "--"]
        if cwd in (None, "/"):
            return [*enter, *argv]
        # Entering the mount namespace puts the command at the node's / (P1). nsenter's own --wd would open
        # the directory on the host, outside the node's root, so change directory inside the node instead.
        return [*enter, "/bin/sh", "-c", 'cd -- "$1" || exit 126; shift; exec "$@"', "node-exec", str(cwd), *argv]

    def exec(
        self,
        name: str,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        input: str | bytes | None = None,
        timeout: float | None = DEFAULT_EXEC_TIMEOUT_S,
        capture: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on node ``name`` as root with a login-like environment (plus ``env``).

        ``capture``: return stdout and stderr as text; otherwise they go to this process's own. Without
        ``input`` and with ``capture``, stdin is empty. Raises :class:`subprocess.TimeoutExpired`.
        """
        full_env = node_environment(env)
        stdin: int | None = None
        if input is None and capture:
            stdin = subprocess.DEVNULL
        data = input.encode() if isinstance(input, str) else input
        completed = subprocess.run(
            self.command(name, argv, cwd),
            input=data,
            stdin=stdin,
            capture_output=capture,
            env=full_env,
            timeout=timeout,
            check=False,
        )
        return subprocess.CompletedProcess(
            completed.args,
            completed.returncode,
            _decode(completed.stdout),
            _decode(completed.stderr),
        )


def node_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a root session on a node; the host's own (virtualenv, PATH) does not leak in."""
    env = {"PATH": NODE_PATH, "HOME": "/root", "USER": "root", "LOGNAME": "root", "SHELL": "/bin/bash"}
    env["LANG"] = "C.UTF-8"
    if "TERM" in os.environ:
        env["TERM"] = os.environ["TERM"]
    env.update(extra or {})
    return env


def mac_of(ip: str) -> str:
    """The stable, locally administered MAC of an address on a cluster's switch: a node's ``eth0`` (its address),
    the bridge (the subnet's network address, which no node has)."""
    return "02:68:70:" + ":".join(f"{int(octet):02x}" for octet in ip.split(".")[1:])


def list_netns() -> list[str]:
    """Names under /run/netns (what ``ip netns list`` shows), without creating the directory."""
    try:
        return sorted(p.name for p in Path("/run/netns").iterdir())
    except FileNotFoundError:
        return []


def remove_cgroups(name: str) -> None:
    """Remove the empty ``slurm_<node>`` cgroup directories slurmd leaves in the host's tree (P15)."""
    root = Path("/sys/fs/cgroup")
    for top in [*root.glob(f"slurm_{name}"), *root.glob(f"*/slurm_{name}")]:
        for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda entry: -len(entry[0])):
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)


def _ip(*args: str, check: bool = True) -> None:
    completed = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if completed.returncode != 0 and check:
        raise NamespaceError(f"ip {' '.join(args)} failed: {completed.stderr.strip()}")


def _wait_gone(record: InitRecord, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if start_ticks(record.pid) != record.start_ticks or is_zombie(record.pid):
                return
        except OSError:
            return
        time.sleep(0.01)
    raise NamespaceError(f"PID 1 of the node ({record.pid}) survived SIGKILL for {timeout:.0f} s")


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "(no output)"
    return " | ".join(text.splitlines()[-lines:]) or "(no output)"


def _decode(value: bytes | None) -> str:
    return value.decode("utf-8", "replace") if value is not None else ""
