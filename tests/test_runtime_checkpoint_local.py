"""Which directory a node's local checkpoint tier goes to: the instance store, where the type has one and it is
mounted (stdlib only: runs on the node's Python 3.8 too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from training_runtime.checkpoint import has_instance_store, node_local_root
from training_runtime.checkpoint.local_disk import mount_points
from training_runtime.hyperpod_facts import DLAMI_NVME
from training_runtime.instance_facts import facts_for

WITH_NVME = "ml.p5.48xlarge"
WITHOUT = "ml.c5.large"


def test_the_instance_table_is_what_decides() -> None:
    with_store = facts_for(WITH_NVME)
    without = facts_for(WITHOUT)
    assert with_store is not None and with_store.instance_store_disks and with_store.instance_store_nvme
    assert without is not None and without.instance_store_disks == 0
    assert has_instance_store(WITH_NVME) is True
    assert has_instance_store(WITHOUT) is False
    assert has_instance_store("ml.not-a-type") is None


def test_the_instance_store_mount_when_the_type_has_one_and_it_is_mounted() -> None:
    mounts = ["/", "/fsx", DLAMI_NVME]
    assert node_local_root(WITH_NVME, "llm-1b", mounts=mounts) == Path(DLAMI_NVME) / "checkpoints" / "llm-1b"
    assert node_local_root(WITH_NVME, "llm-1b", mounts=["/", "/fsx"]) is None  # an image that did not mount it
    assert node_local_root(WITHOUT, "llm-1b", mounts=mounts) is None  # no instance store: shared tier only
    assert node_local_root("ml.not-a-type", "llm-1b", mounts=mounts) is None
    assert node_local_root(WITH_NVME, "x", mounts=["/"], mount="/scratch") is None
    assert node_local_root(WITH_NVME, "x", mounts=["/scratch/"], mount="/scratch") == Path("/scratch/checkpoints/x")


@pytest.mark.parametrize("name", ["", "a/b", "..", "."])
def test_the_name_must_be_one_directory(name: str) -> None:
    with pytest.raises(ValueError, match="one directory name"):
        node_local_root(WITH_NVME, name, mounts=[DLAMI_NVME])


def test_the_mount_table_is_read_from_mountinfo(tmp_path: Path) -> None:
    table = tmp_path / "mountinfo"
    table.write_text(
        "22 1 259:1 / / rw,relatime - ext4 /dev/root rw\n"
        "90 22 259:3 / /opt/dlami/nvme rw,relatime - ext4 /dev/md0 rw\n"
        "91 22 0:50 / /mnt/with\\040space rw - tmpfs tmpfs rw\n"
    )
    assert mount_points(table) == ["/", "/opt/dlami/nvme", "/mnt/with space"]
    assert mount_points(tmp_path / "absent") == []
    assert "/" in mount_points()  # this process's own table
