"""The local cluster's inputs: exactly the lifecycle prefix a deployment uploads, then the emulation's overlays.

Two sources, one result (:class:`LocalInputs`):

* a config file (:func:`from_config`): the prefix built by the functions the constructs use
  (:func:`hyperpod_cdk.core.lifecycle_files.prefix_files` of :func:`hyperpod_cdk.core.deployment.deployment`);
* a synthesized cloud assembly (:func:`from_assembly`, ``local up --from cdk.out``): the files the stack's
  lifecycle upload names, read from the assembly as plain JSON and files.

Either way the staged prefix is the deployed one with only :func:`hyperpod_local.overlay.emulated` applied to
the parameters file; every other file is staged byte for byte. What the deployment says beyond its files (its
node provisioning mode: :class:`DeployedModes`) travels with the staged prefix and is recorded in the work
directory (:func:`stage`), where the emulated control plane reads it (:func:`deployed_modes`).
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import shutil
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_local.control_plane.secrets import login_host_keys_name, rest_key_name, secret_arn
from hyperpod_local.layout import (
    LOCAL_REGION,
    LocalLayout,
    LocalNode,
    cluster_agent_config,
    hosts_file,
    resource_config,
)
from hyperpod_local.overlay import emulated
from hyperpod_local.state import ClusterHandle, LocalClusterError
from training_runtime.groups import CONTROLLER, GroupSpec
from training_runtime.params import LIFECYCLE_DRIVEN, PARAMETERS_FILE_BY_MODE, ProvisioningParameters
from training_runtime.users import USERS_FILE


@dataclass(frozen=True)
class DeployedModes:
    """How the deployment runs Slurm and provisions nodes, as its stack tells HyperPod."""

    mode: str
    """Who configures Slurm (``api-driven`` or ``lifecycle-driven``)."""
    node_provisioning_mode: str | None
    """``continuous`` (``NodeProvisioningMode: Continuous``), or None: HyperPod's all-or-nothing model."""

    @property
    def continuous(self) -> bool:
        return self.node_provisioning_mode == CONTINUOUS

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "node_provisioning_mode": self.node_provisioning_mode}


CONTINUOUS = "continuous"
DEPLOYMENT_RECORD = "deployment.json"
"""The work directory's record of :class:`DeployedModes` (in ``cluster/``, written by :func:`stage`)."""


class StagedPrefix(dict[str, bytes]):
    """The local prefix (relative path -> bytes) and the deployment's modes, which :func:`stage` records."""

    def __init__(self, files: Mapping[str, bytes], modes: DeployedModes) -> None:
        super().__init__(files)
        self.modes = modes


@dataclass(frozen=True)
class LocalInputs:
    """What a deployment would give HyperPod: the cluster's groups and instance counts, and its prefix."""

    source: str
    """The config file, ``<assembly>#<stack>``, or ``the default configuration``: for messages only."""
    modes: DeployedModes
    """Who configures Slurm and how nodes are provisioned (the config's, or the synthesized cluster's)."""
    cluster_name: str
    groups: tuple[GroupSpec, ...]
    counts: Mapping[str, int]
    deployed: ProvisioningParameters
    """The parameters file as deployed (before the emulation's overlays)."""
    files: Mapping[str, bytes]
    """Every file of the deployed prefix by relative path, the parameters file included."""

    def staged_files(
        self,
        *,
        cpus: int | None = None,
        imds_url: str | None = None,
        sagemaker_url: str | None = None,
        secretsmanager_url: str | None = None,
        scaler_timing: tuple[float, float] | None = None,
    ) -> StagedPrefix:
        """The local prefix: the deployed files, the parameters file with the emulation's overlays (``imds_url``:
        the cluster's fake metadata service, for the Spot watcher; ``sagemaker_url``: its emulated control plane;
        ``secretsmanager_url``: its emulated Secrets Manager (the REST API's key);
        ``scaler_timing``: the scaler's cycle and idle minute in seconds, :func:`hyperpod_local.overlay.emulated`)."""
        chosen = [g.instance_type for g in self.groups if g.instance_type]
        local = emulated(
            self.deployed,
            cpus=cpus,
            instance_types=chosen,
            imds_url=imds_url,
            sagemaker_url=sagemaker_url,
            secretsmanager_url=secretsmanager_url,
            scaler_timing=scaler_timing,
        )
        text = local.dumps()
        marker = MARKER.search(text)
        if marker:
            raise LocalClusterError(
                f"{self.source}: the parameters file holds a value only known at deploy ({marker[0]}) "
                "in a field the local cluster keeps. Fix: give that value literally in the config"
            )
        return StagedPrefix({**self.files, local.file_name: (text + "\n").encode()}, self.modes)


def from_config(config_path: Path | str | None) -> LocalInputs:
    """The prefix the constructs upload for a config file (None: ClusterConfig's defaults, as ``app.py``)."""
    from hyperpod_cdk.core.config import ClusterConfig, load_config
    from hyperpod_cdk.core.deployment import deployment
    from hyperpod_cdk.core.lifecycle_files import prefix_files, staged_assets

    config = load_config(config_path) if config_path is not None else ClusterConfig()
    deployed = deployment(config)  # a type chosen at launch is null in its file; the config's default runs
    provisioning = deployed.node_provisioning_mode
    # The REST API's key secret is one the stack creates; here the emulated Secrets Manager's (the overlay's ARN).
    rest_api = deployed.rest_api_parameters(secret_arn(rest_key_name(deployed.cluster_name)), LOCAL_REGION)
    # The login pool's host-key secret too (the control plane creates it with a placeholder, as the stack does).
    login_pool = deployed.login_pool_parameters(secret_arn(login_host_keys_name(deployed.cluster_name)), LOCAL_REGION)
    parameters = dataclasses.replace(deployed.parameters, rest_api=rest_api, login_pool=login_pool)
    return LocalInputs(
        source=str(Path(config_path).absolute()) if config_path is not None else "the default configuration",
        modes=DeployedModes(str(deployed.mode), str(provisioning) if provisioning else None),
        cluster_name=deployed.cluster_name,
        groups=deployed.groups_as_launched,
        counts=dict(deployed.counts),
        deployed=parameters,
        files=prefix_files(staged_assets(), parameters, list(deployed.users)),
    )


LIFECYCLE_DIR = "/opt/ml/lifecycle"
"""Where a node finds the lifecycle prefix (HyperPod downloads it to a directory of its own)."""
MARKER = re.compile(r"<<marker:0x[0-9a-f]+:[0-9]+>>")
"""How CDK writes a CloudFormation value into an uploaded file; the upload replaces it (with JSON quotes)."""
CLUSTER_TYPE = "AWS::SageMaker::Cluster"
UPLOAD_TYPE = "Custom::CDKBucketDeployment"
PUBLISHED_DIR = "hyperpod-cdk.lifecycle"


def from_assembly(outdir: Path | str, stack: str | None = None) -> LocalInputs:
    """The prefix a synthesized stack uploads (a ``BucketDeployment``'s sources, or a published lifecycle
    tree), and its cluster's groups and counts, read from the cloud assembly at ``outdir``."""
    directory = Path(outdir).absolute()
    name, template = _stack_template(directory, stack)
    source = f"{directory}#{name}"
    clusters = [r for r in template.get("Resources", {}).values() if r.get("Type") == CLUSTER_TYPE]
    if len(clusters) != 1:
        raise LocalClusterError(f"{source}: has {len(clusters)} HyperPod clusters; the local cluster runs exactly one")
    files = _uploaded_files(directory, template, clusters[0], source)
    names = [n for n in files if n in PARAMETERS_FILE_BY_MODE.values()]
    if len(names) != 1:
        raise LocalClusterError(f"{source}: the lifecycle upload holds {len(names)} parameters files; expected 1")
    text = MARKER.sub(lambda m: json.dumps(m[0]), files[names[0]].decode())
    deployed = ProvisioningParameters.from_json(json.loads(text))
    groups, counts = _groups(template, clusters[0], deployed, source)
    provisioning = clusters[0]["Properties"].get("NodeProvisioningMode")
    return LocalInputs(
        source=source,
        modes=DeployedModes(deployed.mode, str(provisioning).lower() if provisioning else None),
        cluster_name=deployed.cluster_name,
        groups=groups,
        counts=counts,
        deployed=deployed,
        files=files,
    )


def _stack_template(directory: Path, stack: str | None) -> tuple[str, dict[str, Any]]:
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
    except (OSError, ValueError) as error:
        raise LocalClusterError(
            f"{directory}: not a cloud assembly ({error}). Fix: `cdk synth` first, and pass its output directory "
            "(cdk.out)"
        ) from None
    stacks = {
        name: artifact["properties"]["templateFile"]
        for name, artifact in manifest.get("artifacts", {}).items()
        if artifact.get("type") == "aws:cloudformation:stack"
    }
    templates = {name: json.loads((directory / path).read_text()) for name, path in stacks.items()}
    with_cluster = [
        n for n, t in templates.items() if any(r.get("Type") == CLUSTER_TYPE for r in t["Resources"].values())
    ]
    if stack is None:
        if len(with_cluster) != 1:
            raise LocalClusterError(
                f"{directory}: {len(with_cluster)} stacks have a HyperPod cluster "
                f"({', '.join(with_cluster) or 'none'}). Fix: pass --stack NAME"
            )
        stack = with_cluster[0]
    if stack not in with_cluster:
        raise LocalClusterError(
            f"--stack: got {stack!r}; the stacks with a HyperPod cluster in {directory} are "
            f"{', '.join(with_cluster) or 'none'}"
        )
    return stack, templates[stack]


def _uploaded_files(
    directory: Path, template: dict[str, Any], cluster: dict[str, Any], source: str
) -> dict[str, bytes]:
    """The files under the cluster's ``SourceS3Uri``: the upload's sources in order (a later one wins, as the
    upload unpacks them in order), or the published tree the URI names."""
    from hyperpod_cdk.core.published_layout import read_tree

    uri = json.dumps(cluster["Properties"]["InstanceGroups"][0]["LifeCycleConfig"]["SourceS3Uri"])
    for tree in sorted((directory / PUBLISHED_DIR).glob("*.json")):
        if f"/lifecycle/{tree.stem}/" in uri:
            return read_tree(tree.with_suffix(""))
    uploads = [r["Properties"] for r in template["Resources"].values() if r.get("Type") == UPLOAD_TYPE]
    for upload in uploads:
        bucket = json.dumps(upload.get("DestinationBucketName"))
        if bucket.strip('"') not in uri and not ("Ref" in bucket and json.loads(bucket)["Ref"] in uri):
            continue
        files: dict[str, bytes] = {}
        for key in upload["SourceObjectKeys"]:
            asset = directory / f"asset.{key.removesuffix('.zip')}"
            if asset.is_dir():
                files.update(read_tree(asset))
            elif (directory / f"asset.{key}").is_file():
                files.update(_zip_tree(directory / f"asset.{key}"))
            else:
                raise LocalClusterError(f"{source}: the lifecycle upload's source {key} is not in the assembly")
        if any(name in PARAMETERS_FILE_BY_MODE.values() for name in files):
            return files
    raise LocalClusterError(f"{source}: no lifecycle upload for the cluster's SourceS3Uri ({uri}) in the assembly")


def _zip_tree(path: Path) -> dict[str, bytes]:
    import zipfile

    with zipfile.ZipFile(path) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist() if not info.is_dir()}


def _groups(
    template: dict[str, Any], cluster: dict[str, Any], deployed: ProvisioningParameters, source: str
) -> tuple[tuple[GroupSpec, ...], dict[str, int]]:
    """The parameters' groups (a type left to a template parameter: its default) and the template's counts."""
    defaults = {name: p.get("Default") for name, p in template.get("Parameters", {}).items()}
    problems: list[str] = []

    def value(raw: object, what: str) -> object:
        if isinstance(raw, dict) and set(raw) == {"Ref"} and raw["Ref"] in defaults:
            found = defaults[raw["Ref"]]
            if found is None:
                problems.append(f"{what}: template parameter {raw['Ref']} has no default")
            return found
        if isinstance(raw, dict):
            problems.append(f"{what}: {json.dumps(raw)} is only known at deploy")
            return None
        return raw

    declared = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    groups, counts = [], {}
    for group in deployed.groups:
        entry = declared.get(group.name, {})
        counts[group.name] = int(str(value(entry.get("InstanceCount", 0), f"{group.name}.InstanceCount") or 0))
        if group.instance_type is None and not group.instance_types:
            chosen = value(entry.get("InstanceType"), f"{group.name}.InstanceType")
            group = dataclasses.replace(group, instance_type=str(chosen))
        groups.append(group)
    if problems:
        raise LocalClusterError(f"{source}: " + "; ".join(problems))
    return tuple(groups), counts


def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


RESOURCE_CONFIG = "resource_config.json"
WORKER_RESOURCE_CONFIG = "resource_config.workers.json"
"""The stale copy non-controller nodes get when the cluster has ``stale_worker_copies``."""
CLUSTER_AGENT_CONFIG = "cluster_agent.json"


def stage(
    directory: Path,
    layout: LocalLayout,
    files: Mapping[str, bytes],
    *,
    naming: str | None = None,
    stale_worker_copies: bool = False,
) -> None:
    """The local "S3 prefix" (``bucket/``: :meth:`LocalInputs.staged_files`), the cluster-wide files and the
    shared directory: the resource config (and, ``stale_worker_copies``, the workers' stale one), with a
    ``naming`` (the HyperPod platform) the controller's ``cluster_agent.json``, and the deployment's modes
    (:data:`DEPLOYMENT_RECORD`, read by :func:`deployed_modes`)."""
    if not isinstance(files, StagedPrefix):  # typed as a mapping for callers that pass the prefix along as one
        raise TypeError("stage: give the StagedPrefix of LocalInputs.staged_files (it carries the deployment's modes)")
    bucket = directory / "bucket"
    for name, body in files.items():
        path = bucket / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    cluster = directory / "cluster"
    cluster.mkdir()
    (cluster / "hosts").write_text(hosts_file(layout))
    (cluster / DEPLOYMENT_RECORD).write_text(json.dumps(files.modes.to_json(), indent=2) + "\n")
    (cluster / RESOURCE_CONFIG).write_text(json.dumps(resource_config(layout), indent=2) + "\n")
    if stale_worker_copies:
        stale = resource_config(layout, stale=True)
        (cluster / WORKER_RESOURCE_CONFIG).write_text(json.dumps(stale, indent=2) + "\n")
    if naming is not None:
        (cluster / CLUSTER_AGENT_CONFIG).write_text(json.dumps(cluster_agent_config(naming), indent=2) + "\n")
    (directory / "shared").mkdir(exist_ok=True)


def staged_parameters(directory: Path) -> ProvisioningParameters | None:
    """The staged parameters file in the work directory ``directory`` (None: no prefix)."""
    for name in PARAMETERS_FILE_BY_MODE.values():
        path = directory / "bucket" / name
        if path.is_file():
            return ProvisioningParameters.loads(path.read_text())
    return None


def deployed_modes(directory: Path) -> DeployedModes:
    """The deployment's modes as :func:`stage` recorded them in the work directory ``directory``."""
    try:
        data = json.loads((directory / "cluster" / DEPLOYMENT_RECORD).read_text())
        return DeployedModes(str(data["mode"]), data["node_provisioning_mode"])
    except (OSError, ValueError, KeyError) as error:
        raise LocalClusterError(
            f"{directory}: no record of the deployment's modes ({error}). Fix: bring the cluster up again with this "
            "version of hyperpod-local"
        ) from None


def restage(directory: Path, mode: str) -> None:
    """Refresh the local prefix's scripts and runtime in ``directory`` from this installation (the parameters
    and users files stay): the edit-and-retry loop for lifecycle code."""
    from hyperpod_cdk.core.lifecycle_files import staged_assets

    bucket = directory / "bucket"
    generated = (PARAMETERS_FILE_BY_MODE[mode], USERS_FILE)
    for entry in bucket.iterdir():
        if entry.name in generated:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    shutil.copytree(staged_assets(), bucket, dirs_exist_ok=True)


def provision(cluster: ClusterHandle, node: LocalNode) -> None:
    """What HyperPod puts on a node before the lifecycle script: resource_config.json (a worker's stale copy on
    non-controller nodes when the cluster has ``stale_worker_copies``; on the controller, with
    ``cluster_agent.json`` where staged), the prefix at :data:`LIFECYCLE_DIR` (and, lifecycle-driven,
    ``provisioning_parameters.json`` in the config directory)."""
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        bucket = cluster.workdir / "bucket"
        tar.add(bucket, arcname="lifecycle", filter=as_root)
        staged = cluster.workdir / "cluster"
        stale = cluster.state.variant.stale_worker_copies and node.role != CONTROLLER
        config = staged / (WORKER_RESOURCE_CONFIG if stale else RESOURCE_CONFIG)
        tar.add(config, arcname="config/" + RESOURCE_CONFIG, filter=as_root)
        if node.role == CONTROLLER and (staged / CLUSTER_AGENT_CONFIG).exists():
            tar.add(staged / CLUSTER_AGENT_CONFIG, arcname="config/" + CLUSTER_AGENT_CONFIG, filter=as_root)
        if cluster.state.mode == LIFECYCLE_DRIVEN:
            params = bucket / PARAMETERS_FILE_BY_MODE[LIFECYCLE_DRIVEN]
            tar.add(params, arcname="config/provisioning_parameters.json", filter=as_root)
    script = f"rm -rf {LIFECYCLE_DIR} && mkdir -p /opt/ml && tar -C /opt/ml -xf -"
    result = cluster.exec(node.name, ["/bin/sh", "-c", script], input=archive.getvalue(), timeout=120)
    if result.returncode != 0:
        raise LocalClusterError(f"node {node.name}: copying the lifecycle prefix failed: {result.stderr.strip()}")
