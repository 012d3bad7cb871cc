"""Clusters sharing a file system keep their state and homes apart (issue 39 item 2, review finding M4).

The runtime's directory on shared storage is marked with the cluster's name the first time a node of this release
uses it; a node of another cluster finding the mark refuses to boot (it would adopt that cluster's munge key and
homes) and says how to fix it. A cluster whose config says the file system is shared keeps everything in
directories of its own. A deployed cluster's existing state is read where it is, never moved or deleted.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from runtime_fakes import RecordingRunner, fake_node, touch
from training_runtime.errors import StepFailed
from training_runtime.node import Node
from training_runtime.resources import ResourceConfigError
from training_runtime.steps.munge import MungeKey
from training_runtime.steps.storage import SharedStorage, claim
from training_runtime.steps.users import SshBetweenNodes, Users
from training_runtime.users import User

ALICE = User("alice", 2001, 2001)
OLD_KEY = b"k" * 1024


def _cluster(root: Path, name: str, *, shared: bool = False, instance: str = "controller-1") -> Node:
    """A node of cluster ``name`` whose root (and so ``/fsx``) is ``root``: two clusters on one root share a file
    system. The name comes from HyperPod's resource config, as on a real node."""
    node = fake_node(root, instance=instance, fsx=False)  # generic platform: the runtime's own munge key
    node.resources = dataclasses.replace(node.resources, cluster_name=name)
    node.params = dataclasses.replace(node.params, shared_file_system=shared)
    return node


def _storage(node: Node) -> None:
    """shared-storage without its probe (the recording runner writes nothing)."""
    node.path(node.params.fsx_mount_path).mkdir(parents=True, exist_ok=True)
    SharedStorage().apply(node)


def test_a_deployed_cluster_keeps_reading_its_state_where_it_is(tmp_path: Path) -> None:
    """State an earlier release wrote (no mark) is claimed by the first cluster to run this one, in place: the
    munge key is the same, nothing moves."""
    touch(tmp_path, "/fsx/.hyperpod-cdk/secrets/munge.key").write_bytes(OLD_KEY)
    touch(tmp_path, "/fsx/home/alice/notes.txt", "alice's work\n")
    node = _cluster(tmp_path, "cluster-a")
    _storage(node)
    assert (tmp_path / "fsx/.hyperpod-cdk/cluster").read_text() == "cluster-a\n"
    MungeKey().apply(node)
    assert (tmp_path / "etc/munge/munge.key").read_bytes() == OLD_KEY
    assert node.homes_dir == "/fsx/home" and (tmp_path / "fsx/home/alice/notes.txt").read_text() == "alice's work\n"
    assert not SharedStorage().needed(node)


def test_another_cluster_on_the_same_file_system_is_refused_its_state(tmp_path: Path) -> None:
    node_a = _cluster(tmp_path, "cluster-a")
    _storage(node_a)
    MungeKey().apply(node_a)
    key_a = (tmp_path / "fsx/.hyperpod-cdk/secrets/munge.key").read_bytes()
    (tmp_path / "etc/munge/munge.key").unlink()

    node_b = _cluster(tmp_path, "cluster-b")
    assert SharedStorage().needed(node_b)
    with pytest.raises(StepFailed) as refused:
        _storage(node_b)
    message = str(refused.value)
    assert "holds the runtime state of cluster 'cluster-a'" in message and "not of this cluster 'cluster-b'" in message
    assert "Fix: set storage.existing.shared: true" in message
    assert "/fsx/.hyperpod-cdk/clusters/cluster-b" in message and "/fsx/home/.clusters/cluster-b" in message
    with pytest.raises(StepFailed, match="cluster 'cluster-a'"):  # the munge step refuses the key on its own too
        MungeKey().apply(node_b)
    assert not (tmp_path / "etc/munge/munge.key").exists()
    assert (tmp_path / "fsx/.hyperpod-cdk/cluster").read_text() == "cluster-a\n"  # the mark is never replaced
    assert (tmp_path / "fsx/.hyperpod-cdk/secrets/munge.key").read_bytes() == key_a


def test_a_shared_file_system_gives_the_cluster_its_own_state_and_homes(tmp_path: Path) -> None:
    node_a = _cluster(tmp_path, "cluster-a")
    _storage(node_a)
    MungeKey().apply(node_a)
    touch(tmp_path, "/etc/passwd", "")
    touch(tmp_path, "/etc/group", "")
    Users([ALICE]).apply(node_a)
    touch(tmp_path, "/fsx/home/alice/.ssh/id_ed25519", "a's private key\n")
    key_a = (tmp_path / "fsx/.hyperpod-cdk/secrets/munge.key").read_bytes()

    node_b = _cluster(tmp_path, "cluster-b", shared=True)
    assert node_b.shared_dir == "/fsx/.hyperpod-cdk/clusters/cluster-b"
    assert node_b.homes_dir == "/fsx/home/.clusters/cluster-b"
    _storage(node_b)
    MungeKey().apply(node_b)
    key_b = (tmp_path / "fsx/.hyperpod-cdk/clusters/cluster-b/secrets/munge.key").read_bytes()
    assert key_b != key_a and (tmp_path / "etc/munge/munge.key").read_bytes() == key_b
    assert (tmp_path / "fsx/.hyperpod-cdk/clusters/cluster-b/cluster").read_text() == "cluster-b\n"
    Users([ALICE]).apply(node_b)
    SshBetweenNodes([ALICE]).apply(node_b)
    assert (tmp_path / "fsx/home/.clusters/cluster-b/alice/.ssh").is_dir()
    assert isinstance(node_b.runner, RecordingRunner)
    assert node_b.runner.ran("runuser")[-1][-1] == "/fsx/home/.clusters/cluster-b/alice/.ssh/id_ed25519"
    # cluster A's state and its alice's home are as they were
    assert (tmp_path / "fsx/.hyperpod-cdk/cluster").read_text() == "cluster-a\n"
    assert (tmp_path / "fsx/.hyperpod-cdk/secrets/munge.key").read_bytes() == key_a
    assert (tmp_path / "fsx/home/alice/.ssh/id_ed25519").read_text() == "a's private key\n"


def test_the_mark_is_hyperpods_cluster_name_not_the_parameters_file(tmp_path: Path) -> None:
    """Two launches of one published template share a parameters file (and its cluster_name), but HyperPod names
    each: the resource config's name is the one that counts."""
    node = _cluster(tmp_path, "launch-2")
    assert node.params.cluster_name == "test"
    _storage(node)
    assert (tmp_path / "fsx/.hyperpod-cdk/cluster").read_text() == "launch-2\n"


def test_claim_never_replaces_a_mark(tmp_path: Path) -> None:
    """Two clusters' nodes bootstrapping at once: the mark is linked into place, so the first one stays."""
    touch(tmp_path, "/fsx/.hyperpod-cdk/cluster", "cluster-a\n")
    claim(_cluster(tmp_path, "cluster-b"))
    assert (tmp_path / "fsx/.hyperpod-cdk/cluster").read_text() == "cluster-a\n"
    assert [p.name for p in (tmp_path / "fsx/.hyperpod-cdk").iterdir()] == ["cluster"]  # no temporary left


def test_a_cluster_name_outside_hyperpods_grammar_never_reaches_a_path(tmp_path: Path) -> None:
    node = _cluster(tmp_path, "../../etc", shared=True)
    with pytest.raises(ResourceConfigError, match=r"ClusterConfig\.ClusterName: got '\.\./\.\./etc'"):
        _ = node.shared_dir
    with pytest.raises(ResourceConfigError):
        _ = node.homes_dir


def test_the_config_says_so_through_the_parameters_file() -> None:
    """``storage.existing.shared`` (or OpenZFS's) reaches the nodes as ``hyperpod_cdk.shared_file_system``; a
    cluster that does not share writes no such key, so its parameters file stays as it was."""
    from hyperpod_cdk.core.config import ClusterConfig
    from hyperpod_cdk.core.deployment import deployment
    from training_runtime.params import OUR_KEY, ParametersError, ProvisioningParameters

    lustre = {"file_system_id": "fs-0123456789abcdef0", "mount_name": "abcdefgh", "security_group_id": "sg-01234567"}
    shared = deployment(ClusterConfig.model_validate({"storage": {"existing": {**lustre, "shared": True}}}))
    alone = deployment(ClusterConfig.model_validate({"storage": {"existing": lustre}}))
    assert shared.parameters.to_json()[OUR_KEY]["shared_file_system"] is True
    assert "shared_file_system" not in alone.parameters.to_json()[OUR_KEY]
    assert ProvisioningParameters.loads(shared.parameters.dumps()).shared_file_system is True
    assert ProvisioningParameters.loads(alone.parameters.dumps()).shared_file_system is False
    data = shared.parameters.to_json()
    data[OUR_KEY]["shared_file_system"] = "yes"
    with pytest.raises(ParametersError, match="shared_file_system: got 'yes'; expected true, false or absent"):
        ProvisioningParameters.from_json(data)
