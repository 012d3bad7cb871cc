"""Staging the lifecycle prefix: what the constructs upload, as files (and a tar) the nodes copy."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

from hyperpod_local.layout import (
    LocalLayout,
    hosts_file,
    resource_config,
)


def _as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _stage(directory: Path, layout: LocalLayout, generated: dict[str, str]) -> None:
    """The local "S3 prefix" (``bucket/``: the assets plus the files the constructs generate: parameters,
    users), the cluster-wide files and the shared directory."""
    from hyperpod_cdk.constructs.lifecycle import staged_assets

    bucket = directory / "bucket"
    shutil.copytree(staged_assets(), bucket)
    for name, text in generated.items():
        (bucket / name).write_text(text)
    cluster = directory / "cluster"
    cluster.mkdir()
    (cluster / "hosts").write_text(hosts_file(layout))
    (cluster / "resource_config.json").write_text(json.dumps(resource_config(layout), indent=2) + "\n")
    (directory / "shared").mkdir(exist_ok=True)
