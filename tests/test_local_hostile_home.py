"""A hostile user's links in their shared home, then a node re-bootstraps (issue 39 items 2 and 6, review H2).

On a local cluster, each kind of link in ``tests/hostile_home.py`` is planted in the researcher's home on the shared
file system (links to root-owned files beside it, as the node sees them under ``/fsx``); then a worker runs its
lifecycle script again, as a replaced or re-imaged node would. The node still boots, says what it left alone, and
nothing outside the home changes.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from hostile_home import KINDS, plant
from hyperpod_local import LocalCluster
from local_support import cpu_cluster, requires_local_cluster

pytestmark = [requires_local_cluster, pytest.mark.hostile]  # the hostile-user drill (tests/hostile_drill.py)

WORKER = "worker-group-1-1"
USER, UID = "researcher", 2001
MOUNT = "/fsx"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with cpu_cluster(tmp_path_factory.mktemp("hostile-home"), "hphh", "10.233.0.0/24") as cluster:
        yield cluster


@pytest.mark.parametrize("kind", KINDS)
def test_a_node_rebootstrapping_follows_no_link_the_user_planted(cluster: LocalCluster, kind: str) -> None:
    shared = cluster.workdir / "shared"
    home = shared / "home" / USER
    saved = home / ".ssh.before-drill"
    (home / ".ssh").rename(saved)
    outside = shared / f"drill-{kind}"
    try:
        planted = plant(home, kind, outside, UID, UID, seen_as=lambda p: f"{MOUNT}/{p.relative_to(shared)}")
        code, output = cluster.bootstrap(WORKER, timeout=300)
        assert code == 0, output
        assert planted.changed() == []
        assert '"event": "left-alone"' in output and f"{MOUNT}/home/{USER}/.ssh" in output, output
    finally:
        ssh = home / ".ssh"
        if ssh.is_symlink():
            ssh.unlink()
        else:
            shutil.rmtree(ssh, ignore_errors=True)
        saved.rename(ssh)
        shutil.rmtree(outside, ignore_errors=True)


def test_the_researcher_s_ssh_works_again_once_the_links_are_gone(cluster: LocalCluster) -> None:
    code, output = cluster.bootstrap(WORKER, timeout=300)
    assert code == 0, output
    listed = cluster.exec(WORKER, ["runuser", "-u", USER, "--", "ls", "-la", f"{MOUNT}/home/{USER}/.ssh"], timeout=60)
    assert listed.returncode == 0 and "authorized_keys" in listed.stdout, listed.stdout + listed.stderr
