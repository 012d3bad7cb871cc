"""No data repository association covers the users' homes or the runtime's state (issue 39 item 2, review M3).

FSx exports what is written below an association to S3 and imports the bucket into it; at ``/``, ``/home`` or
``/.hyperpod-cdk`` that would send every user's private key and the munge key to the bucket. The rule belongs to
the field, so the config file, ``validate`` and the constructs' own props are all refused the same way.
"""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import aws_s3 as s3

from builders import new_stack
from hyperpod_cdk import ClusterNetwork, ConfigurationError, LustreStorage, S3DataRepository
from hyperpod_cdk.core.config import ClusterConfig

ZFS = {
    "existing": {
        "file_system_id": "fs-0123456789abcdef1",
        "dns_name": "fs-0123456789abcdef1.fsx.us-west-2.amazonaws.com",
        "security_group_id": "sg-0123456789abcdef2",
    }
}
LUSTRE = {"file_system_id": "fs-0123456789abcdef0", "mount_name": "abcdefgh", "security_group_id": "sg-0123456789abc"}


def _private(path: str, **sections: Any) -> list[str]:
    storage = {"data_repositories": [{"name": "data", "file_system_path": path}], **sections.pop("storage", {})}
    config = ClusterConfig.model_validate({"mode": "api-driven", "storage": storage, **sections})
    return [str(p) for p in config.problems() if p.rule == "DRA-PRIVATE"]


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("/", "/ covers /.hyperpod-cdk"),
        ("/home", "/home is /home, which holds the users' homes"),
        ("/home/alice", "/home/alice lies inside /home"),
        ("/.hyperpod-cdk", "/.hyperpod-cdk is /.hyperpod-cdk, which holds the runtime's state"),
        ("/.hyperpod-cdk/secrets", "lies inside /.hyperpod-cdk"),
        ("//home/", "/home is /home"),
        ("/data/../home", "/home is /home"),
        ("/./.hyperpod-cdk", "/.hyperpod-cdk is /.hyperpod-cdk"),
    ],
)
def test_an_association_over_homes_or_runtime_state_is_refused(path: str, words: str) -> None:
    (problem,) = _private(path)
    assert problem.startswith(f"storage.data_repositories[0].file_system_path: got {path!r}; ")
    assert words in problem and "export" in problem
    assert "allowed: a directory outside /.hyperpod-cdk and /home" in problem and "Fix: " in problem


@pytest.mark.parametrize("path", ["/datasets", "/homes", "/home-data", "/.hyperpod-cdk-data", "/data/home"])
def test_an_association_beside_them_is_accepted(path: str) -> None:
    assert _private(path) == []


def test_homes_on_openzfs_leave_lustre_home_free_unless_the_lustre_file_system_is_adopted() -> None:
    """Homes on FSx for OpenZFS: Lustre's /home holds no home of this cluster; an adopted Lustre file system may
    hold another cluster's homes there, so it stays refused."""
    assert _private("/home", storage_openzfs={}) == []
    assert _private("/.hyperpod-cdk", storage_openzfs={}) != []
    assert _private("/home", storage_openzfs=ZFS, storage={"existing": LUSTRE}) != []


def test_the_constructs_refuse_it_too() -> None:
    """LustreStorage used directly (no config file) runs the same rule on its props; it cannot know where the
    homes are, so it assumes /home."""
    stack = new_stack()
    bucket = s3.Bucket(stack, "Data")
    with pytest.raises(ConfigurationError) as error:
        LustreStorage(
            stack,
            "Storage",
            network=ClusterNetwork(stack, "Network"),
            data_repositories=[
                S3DataRepository(name="everything", bucket=bucket, file_system_path="/"),
                S3DataRepository(name="keys", bucket=bucket, file_system_path="/home/alice/.ssh"),
            ],
        )
    text = str(error.value)
    assert "data_repositories[0].file_system_path: got '/'; / covers /.hyperpod-cdk" in text
    assert "data_repositories[1].file_system_path: got '/home/alice/.ssh'; /home/alice/.ssh lies inside /home" in text
