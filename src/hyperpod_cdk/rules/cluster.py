"""Rules on the cluster's own fields: its name, the mount path, tags, and storage it cannot do without."""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.groups import MAX_NAME_LENGTH, NAME_PATTERN
from training_runtime.hyperpod_facts import TAGS_MAX
from training_runtime.mount_paths import mount_path_problem
from training_runtime.params import LIFECYCLE_DRIVEN
from training_runtime.problems import WARNING, Problem

MAX_TAGS = TAGS_MAX
RESERVED_TAGS = 5
"""CloudFormation adds its own stack tags to every resource."""
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256

rule = REGISTRY.rule


@rule("CL-NAME", "cluster", "cluster_name", source="AWS::SageMaker::Cluster ClusterName")
def cluster_name(view: ClusterView) -> Iterator[Problem]:
    """The cluster name is 1-63 letters, digits and hyphens, starting and ending with a letter or digit."""
    name = view.cluster_name
    if view.concrete(name) and not (NAME_PATTERN.fullmatch(name) and len(name) <= MAX_NAME_LENGTH):
        yield Problem(
            view.path("cluster", "cluster_name"),
            "use 1-63 letters, digits and hyphens, starting and ending with a letter or digit",
            got=name,
        )


@rule("CL-MOUNT-PATH", "cluster", "fsx_mount_path", source="AWS::SageMaker::Cluster ClusterFsxLustreConfig")
def mount_path(view: ClusterView) -> Iterator[Problem]:
    """The Lustre mount path is absolute, has no trailing slash, and is not at, in or above a reserved directory."""
    if view.concrete(view.fsx_mount_path):
        yield from mount_path_problems(view.path("cluster", "fsx_mount_path"), view.fsx_mount_path, "/fsx")


def mount_path_problems(where: str, path: str, example: str) -> Iterator[Problem]:
    """What is wrong with a file system's mount path: its form, or a reserved directory
    (:mod:`training_runtime.mount_paths`, which the node applies too)."""
    problem = mount_path_problem(where, path, example)
    if problem is not None:
        yield problem


@rule("CL-TAG-COUNT", "cluster", "tags", source="AWS tagging limits (50 per resource)")
def tag_count(view: ClusterView) -> Iterator[Problem]:
    """At most 45 tags: a resource holds 50 and CloudFormation adds its own."""
    if len(view.tags) > MAX_TAGS - RESERVED_TAGS:
        yield Problem(
            view.path("cluster", "tags"),
            f"at most {MAX_TAGS - RESERVED_TAGS} tags (CloudFormation adds its own)",
            got=len(view.tags),
        )


@rule("CL-TAG-KEY", "cluster", "tags.<key>", source="AWS tagging limits")
def tag_keys(view: ClusterView) -> Iterator[Problem]:
    """A tag key is 1-128 characters, a value at most 256; neither starts with 'aws:'."""
    for key, value in view.tags.items():
        if view.concrete(key):
            yield from tag_problems(view.path("cluster", f"tags.{key}"), key, value, view)


def tag_problems(path: str, key: str, value: object, view: ClusterView) -> Iterator[Problem]:
    """What is wrong with one tag (``value`` None: none given), reported at ``path``."""
    if key.lower().startswith("aws:") or not 1 <= len(key) <= MAX_TAG_KEY:
        yield Problem(path, f"a tag key is 1-{MAX_TAG_KEY} characters and must not start with 'aws:'", got=key)
    if view.concrete(value) and len(str(value)) > MAX_TAG_VALUE:
        yield Problem(path, f"a tag value is at most {MAX_TAG_VALUE} characters", got=value)
    if view.concrete(value) and str(value).lower().startswith("aws:"):
        yield Problem(path, "a tag value must not start with 'aws:' (AWS reserves the prefix)", got=value)


@rule("CL-STRATEGY-MODE", "cluster", "slurm_config_strategy", source="SageMaker ClusterOrchestratorSlurmConfig")
def strategy_needs_api_mode(view: ClusterView) -> Iterator[Problem]:
    """slurm_config_strategy applies only to api-driven mode (HyperPod owns slurm.conf there)."""
    if "slurm_config_strategy" in view.given and view.mode == LIFECYCLE_DRIVEN:
        yield Problem(
            view.path("cluster", "slurm_config_strategy"),
            "applies only to mode api-driven; in lifecycle-driven mode the node runtime writes slurm.conf",
            got=str(view.slurm_config_strategy),
            fix="remove it, or use mode: api-driven",
        )


@rule("CL-NAME-REPLACES", "cluster", "cluster_name", level=WARNING, source="AWS::SageMaker::Cluster (createOnly)")
def cluster_name_replaces(view: ClusterView) -> Iterator[Problem]:
    """Changing cluster_name later replaces the cluster (every node is created anew)."""
    previous = view.previous
    if previous is not None and previous.cluster_name != view.cluster_name:
        yield Problem(
            view.path("cluster", "cluster_name"),
            f"changed from {previous.cluster_name!r}: CloudFormation replaces the cluster and every node",
            got=view.cluster_name,
            fix="keep the old name unless you mean to rebuild the cluster",
        )


@rule(
    "CL-STORAGE-NEEDED",
    "storage",
    "storage",
    needs=("cluster", "users", "runtime"),
    source="hyperpod-cdk (docs/node-runtime.md)",
)
def storage_needed(view: ClusterView) -> Iterator[Problem]:
    """Lifecycle-driven mode, users and the PyTorch environment need the shared file system."""
    if view.storage is not None:
        return
    needs = []
    if view.mode == LIFECYCLE_DRIVEN:
        needs.append("lifecycle-driven mode (the munge key)")
    if view.users:
        needs.append("users (their homes)")
    if view.runtime.get("pytorch"):
        needs.append("runtime.pytorch (the shared environment)")
    if needs:
        yield Problem(
            view.path("storage"),
            "null, but the node runtime needs a shared file system for " + ", ".join(needs),
            fix="configure storage or drop them",
        )
