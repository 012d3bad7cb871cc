"""The local cluster's nodes for real (root only): identity, network, private root, shared directory,
crash and boot, and a teardown that leaves the host as it was. No lifecycle scripts run here."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperpod_local import LocalCluster, LocalClusterError
from hyperpod_local.namespaces import InitRecord, list_netns
from hyperpod_local.plan import UpOptions
from local_support import requires_local_cluster, variant
from training_runtime.node import GENERIC

pytestmark = requires_local_cluster

CONFIG = """\
cluster_name: harness
storage: null
instance_groups:
  - {name: controller, role: controller, instance_type: ml.m5.large, count: 1}
  - {name: workers, role: compute, instance_type: ml.c5.xlarge, count: 2}
"""
CONTROLLER, WORKER_1, WORKER_2 = "controller-1", "workers-1", "workers-2"


PREFIX = f"t{os.getpid()}"


def _host_snapshot(base: Path) -> dict[str, object]:
    """What this test's cluster may change on the host: its network namespaces, the mounts of their names and
    under this process's temporary directories (``base``), the host name; and, while no other cluster runs beside
    it (``make test`` runs two at a time), whether /run/netns and /run/mount exist at all."""
    ours = (f"/run/netns/{PREFIX}-", str(base))
    with open("/proc/self/mountinfo") as mountinfo:
        mounts = sorted(
            (line.split()[4], line.split(" - ")[1].split()[0]) for line in mountinfo if line.split()[4].startswith(ours)
        )
    netns = list_netns()
    snapshot: dict[str, object] = {
        "mounts": mounts,
        "netns": [name for name in netns if name.startswith(f"{PREFIX}-")],
        "hostname": os.uname().nodename,
    }
    if all(name.startswith(f"{PREFIX}-") for name in netns):
        snapshot["run_netns"] = Path("/run/netns").exists()
        snapshot["run_mount"] = Path("/run/mount").exists()
    return snapshot


@pytest.fixture(scope="module")
def host_before(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    return _host_snapshot(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, host_before: dict[str, object]) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("local")
    config = base / "cluster.yaml"
    config.write_text(CONFIG)
    cluster = LocalCluster.up(
        config,
        base / "work",
        variant(platform=GENERIC),
        UpOptions(prefix=PREFIX, subnet="10.251.0.0/24", bootstrap=False),
    )
    yield cluster
    if (cluster.workdir / "state.json").exists():
        cluster.down()


def _run(cluster: LocalCluster, node: str, script: str) -> str:
    result = cluster.exec(node, ["/bin/sh", "-c", script], timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def _reachable(cluster: LocalCluster, source: str, target: str) -> bool:
    """A TCP connection from ``source`` to ``target`` (a name) gets an answer (here: connection refused)."""
    probe = (
        "import socket,sys\n"
        "try:\n"
        f"    socket.create_connection(({target!r}, 9), timeout=2)\n"
        "except ConnectionRefusedError:\n"
        "    sys.exit(0)\n"
        "except OSError as e:\n"
        "    print(e); sys.exit(1)\n"
    )
    return cluster.exec(source, ["python3", "-c", probe], timeout=30).returncode == 0


def test_nodes_have_their_names_and_addresses(cluster: LocalCluster) -> None:
    assert [n.name for n in cluster.nodes] == [CONTROLLER, WORKER_1, WORKER_2]
    for node in cluster.nodes:
        assert _run(cluster, node.name, "hostname; cat /etc/hostname; hostname -I").split() == [
            node.name,
            node.name,
            node.ip,
        ]
        config = _run(cluster, node.name, "cat /opt/ml/config/resource_config.json")
        assert f'"InstanceName": "{node.name}"' in config
        assert _run(cluster, node.name, "ls /opt/ml/lifecycle/on_init_complete.sh")
    assert _run(cluster, CONTROLLER, f"getent hosts {WORKER_2}").split() == ["10.251.0.12", WORKER_2, "ip-10-251-0-12"]


def test_nodes_reach_each_other_by_name_and_nothing_else(cluster: LocalCluster) -> None:
    server = (
        "import socket\n"
        "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "s.bind(('', 7777)); s.listen(); s.settimeout(20)\n"
        "c, peer = s.accept(); c.sendall(socket.gethostname().encode()); print(peer[0])\n"
    )
    client = (
        "import socket, time\n"
        "for _ in range(200):\n"
        "    try:\n"
        f"        c = socket.create_connection(({WORKER_1!r}, 7777), timeout=2); break\n"
        "    except ConnectionRefusedError:\n"
        "        time.sleep(0.02)\n"
        "print(c.recv(100).decode())\n"
    )
    listening = subprocess.Popen(
        cluster.namespaces.command(WORKER_1, ["python3", "-c", server]), stdout=subprocess.PIPE, text=True
    )
    try:
        answer = cluster.exec(CONTROLLER, ["python3", "-c", client], timeout=30)
        assert answer.stdout.strip() == WORKER_1, answer.stderr
        out, _ = listening.communicate(timeout=20)
    finally:
        listening.kill()
        listening.wait()
    assert out.strip() == cluster.node(CONTROLLER).ip, "the worker sees the controller's own address"
    assert _reachable(cluster, WORKER_2, CONTROLLER)
    # No default route: the host, other networks and DNS are out of reach at once.
    routes = _run(cluster, CONTROLLER, "ip route")
    assert "default" not in routes and "10.251.0.0/24 dev eth0" in routes
    assert cluster.exec(CONTROLLER, ["getent", "hosts", "example.com"], timeout=10).returncode != 0


def test_a_nodes_root_is_private_copy_on_write(cluster: LocalCluster) -> None:
    marker = f"/etc/hpcdk-harness-{cluster.state.prefix}"
    _run(cluster, WORKER_1, f"echo worker-1 > {marker} && useradd --system hpcdktest && mkdir -p /opt/ml/extra")
    assert not Path(marker).exists(), "a node's write reached the host"
    assert "hpcdktest" not in Path("/etc/passwd").read_text()
    assert cluster.exec(WORKER_2, ["test", "-e", marker]).returncode == 1
    assert (cluster.workdir / "nodes" / WORKER_1 / "upper" / marker.lstrip("/")).read_text() == "worker-1\n"
    # Private /run and /tmp too.
    _run(cluster, WORKER_1, "touch /run/hpcdk-run /tmp/hpcdk-tmp")
    assert cluster.exec(WORKER_2, ["sh", "-c", "test -e /run/hpcdk-run || test -e /tmp/hpcdk-tmp"]).returncode == 1
    assert not Path("/tmp/hpcdk-tmp").exists()


def test_the_shared_directory_is_shared(cluster: LocalCluster) -> None:
    _run(cluster, CONTROLLER, "echo from-controller > /fsx/hello")
    assert _run(cluster, WORKER_2, "cat /fsx/hello") == "from-controller"
    assert (cluster.workdir / "shared" / "hello").read_text() == "from-controller\n"
    assert _run(cluster, WORKER_1, "findmnt -n -o TARGET /fsx") == "/fsx"


def test_crash_kills_every_process_and_boot_keeps_the_disk(cluster: LocalCluster) -> None:
    _run(cluster, WORKER_2, "echo kept > /etc/hpcdk-disk; setsid sleep 1000 </dev/null >/dev/null 2>&1 &")
    record = cluster.namespaces.record(WORKER_2)
    assert isinstance(record, InitRecord)
    processes = cluster.namespaces.processes(record)
    assert record.pid in processes and len(processes) >= 3  # PID 1, its sleep, our sleep
    netns = cluster.namespaces.netns(WORKER_2)
    assert netns in list_netns()

    cluster.crash(WORKER_2)
    assert not cluster.alive(WORKER_2)
    assert cluster.namespaces.processes(record) == []
    assert all(not Path(f"/proc/{pid}").exists() or _not_in(pid, record) for pid in processes)
    assert netns not in list_netns()
    with pytest.raises(LocalClusterError, match="not running"):
        cluster.exec(WORKER_2, ["true"])
    assert not _reachable(cluster, CONTROLLER, WORKER_2)

    assert cluster.boot(WORKER_2) is None  # created without bootstrap: nothing to re-run
    assert cluster.alive(WORKER_2)
    assert _run(cluster, WORKER_2, "cat /etc/hpcdk-disk") == "kept"
    uptime = float(_run(cluster, WORKER_2, "cut -d' ' -f1 /proc/uptime"))
    assert uptime < 10, f"a rebooted node has a fresh boot time (uptime {uptime})"
    host_uptime = float(Path("/proc/uptime").read_text().split()[0])
    assert host_uptime > uptime
    assert _run(cluster, WORKER_2, "hostname; hostname -I").split() == [WORKER_2, "10.251.0.12"]
    assert _reachable(cluster, CONTROLLER, WORKER_2)
    assert _run(cluster, WORKER_2, "pgrep -x sleep | wc -l") == "1", "only PID 1's own sleep"


def _not_in(pid: int, record: InitRecord) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid") != record.pid_ns
    except OSError:
        return True


def test_down_leaves_the_host_as_it_was(
    cluster: LocalCluster, host_before: dict[str, object], tmp_path_factory: pytest.TempPathFactory
) -> None:
    records = [r for r in (cluster.namespaces.record(n.name) for n in cluster.nodes) if r is not None]
    assert len(records) == 3
    workdir = cluster.workdir
    cluster.down()
    assert all(cluster.namespaces.processes(r) == [] for r in records)
    after = _host_snapshot(tmp_path_factory.getbasetemp())
    if "run_netns" not in after or "run_netns" not in host_before:  # another cluster came or went meanwhile
        host_before = {key: value for key, value in host_before.items() if key not in ("run_netns", "run_mount")}
        after = {key: value for key, value in after.items() if key not in ("run_netns", "run_mount")}
    assert after == host_before
    assert not workdir.exists()
    leftovers = subprocess.run(["pgrep", "-f", str(workdir)], capture_output=True, text=True, check=False)
    assert leftovers.stdout == ""
    zombies = [
        p.name for p in Path("/proc").iterdir() if p.name.isdigit() and _parent_and_state(p) == (os.getpid(), "Z")
    ]
    assert zombies == [], "every launcher was reaped (P16)"


def _parent_and_state(proc: Path) -> tuple[int, str] | None:
    try:
        text = (proc / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0]
