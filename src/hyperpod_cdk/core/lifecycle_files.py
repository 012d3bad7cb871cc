"""The lifecycle prefix's files, without CDK: the assets every cluster gets and the files built for one.

``LifecycleScripts`` uploads :func:`staged_assets` plus the parameters file and the users file;
``PublishedLifecycleScripts`` publishes :func:`prefix_files`; the local cluster stages the same files. No
``aws_cdk`` import, so the local cluster reads them without Node.js.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from hyperpod_cdk.core.published_layout import read_tree
from training_runtime.params import ProvisioningParameters
from training_runtime.users import USERS_FILE, User, dumps


@functools.cache
def staged_assets() -> Path:
    """One directory holding ``lifecycle_assets/*`` and the ``training_runtime`` package, as plain files.

    HyperPod downloads the prefix unzipped, so the runtime travels as source next to the entry scripts.
    """
    staging = Path(tempfile.mkdtemp(prefix="hyperpod-cdk-assets-"))
    atexit.register(shutil.rmtree, staging, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    assets = resources.files("hyperpod_cdk") / "lifecycle_assets"
    runtime = resources.files("training_runtime")
    with resources.as_file(assets) as assets_dir, resources.as_file(runtime) as runtime_dir:
        shutil.copytree(assets_dir, staging, dirs_exist_ok=True, ignore=ignore)
        shutil.copytree(runtime_dir, staging / "training_runtime", ignore=ignore)
    return staging


def prefix_files(
    assets_dir: Path, parameters: ProvisioningParameters | None, users: Sequence[User] | None
) -> dict[str, bytes]:
    """Every file under a cluster's prefix by relative path: the assets, the parameters file and (when
    there are users) the users file."""
    files = read_tree(assets_dir)
    if parameters is not None:
        files[parameters.file_name] = (parameters.dumps() + "\n").encode()
    if users:
        files[USERS_FILE] = dumps(list(users)).encode()
    return files
