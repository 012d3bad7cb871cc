"""Every pinned version of outside software the runtime installs, in one place.

Moving a cluster forward means changing a line here (and the tests that pin the same figures on purpose,
as an independent transcription).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

# --- EFA ---------------------------------------------------------------------------------------------
EFA_INSTALLER_VERSION = "1.47.0"
"""The EFA installer every node installs when its EFA software is missing or broken.

1.47.0 is what awsome-distributed-training's nccl-tests image pinned at the time of writing (with NCCL
2.29.3); it bundles aws-ofi-nccl (shipped inside the installer since 1.39, under /opt/amazon/ofi-nccl).
Avoid 1.40.0 with debug packages (aws/aws-ofi-nccl#872); 1.50+ bundles the EFA-GDA plugin.
"""

# --- Neuron system packages (apt) ---------------------------------------------------------------------
NEURON_RELEASE = "2.28.1"
"""The Neuron SDK release whose system packages are pinned (versions from the SDK's own release manifest,
``src/helperscripts/n2-manifest.json`` in aws-neuron/aws-neuron-sdk).

Why not the newest: Neuron 2.30 dropped PyTorch/XLA *training* ("PyTorch 2.9 was the last version based
on the PyTorch/XLA backend for training"), and the end-of-support notice for NxD Training names 2.28 as
its last release - the two notices disagree by one release, so this takes the older. Trn1 has no
successor stack (the native "TorchNeuron" backend targets Trn2/Trn3, and was a private beta), so trn1
training stays on this last XLA-capable release. Its PyTorch stack is pinned below.
"""
NEURON_PACKAGES: Tuple[Tuple[str, str], ...] = (
    ("aws-neuronx-dkms", "2.26.10.0"),
    ("aws-neuronx-collectives", "2.30.59.0"),
    ("aws-neuronx-runtime-lib", "2.30.51.0"),
    ("aws-neuronx-tools", "2.28.23.0"),
)

NEURON_KEY_FINGERPRINT = "00FA2C1079260870A76D2C285749CAD8646D9185"
"""The Neuron apt repository's signing key (``Amazon AWS Neuron <neuron-maintainers@amazon.com>``, created
2019-11-11): the keyring file must hold this key and no other.

Sources: AWS's Neuron docs name the key by its ID only: "EXPKEYSIG 5749CAD8646D9185 Amazon AWS Neuron
<neuron-maintainers@amazon.com>" (awsdocs-neuron.readthedocs-hosted.com, setup/setup-troubleshooting, "How to update
Neuron repository GNU Privacy Guard (GPG) key"). The full fingerprint is the one Bottlerocket (bottlerocket-os, an
AWS project) checks Neuron's packages against (its Neuron kmod specs import
``gpgkey-00FA2C1079260870A76D2C285749CAD8646D9185.asc`` before ``rpmkeys --checksig``); its last 16 digits are that
key ID. The Neuron docs do not print the full fingerprint (checked 2026-12-04); a key rotation fails the step
with both fingerprints named, and moving to the new key means changing this line.
"""

# --- Neuron PyTorch stack (pip): Neuron SDK 2.28.1, the release above ----------------------------------
NEURON_PIP_INDEX = "https://pip.repos.neuron.amazonaws.com"
TORCH_NEURONX = "torch-neuronx==2.9.0.2.12.22436"
NEURONX_CC = "neuronx-cc==2.23.6484.0"
NEURON_TORCH_SERIES = ".".join(TORCH_NEURONX.split("==")[1].split(".")[:2])
"""The PyTorch series the pinned torch-neuronx runs on, from its version (``2.9.0.x`` runs on PyTorch 2.9): the
last PyTorch/XLA line that Neuron supports for training."""
NEURON_PYTHONS = ("3.10", "3.11", "3.12")
"""Python versions the pinned torch-neuronx and neuronx-cc wheels exist for (Neuron 2.28.1 manifest)."""

# --- SMDDP wheels (pip) -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SmddpWheel:
    torch: str
    cuda: str
    """The CUDA build of torch the wheel is compiled against (``cu121``)."""
    python: str
    url: str
    pypi_matches: bool
    """Whether PyPI's own torch wheel of this version is that CUDA build (so no index_url is needed)."""


SMDDP_INSTANCE_TYPES = ("ml.p4d.24xlarge", "ml.p4de.24xlarge")
"""SMDDP's AllGather/AllReduce run only on these; 2.3.0 and later refuse to load elsewhere."""
_SMDDP = "https://smdataparallel.s3.amazonaws.com/binary/pytorch"
SMDDP_WHEELS: Tuple[SmddpWheel, ...] = (
    # From the SageMaker developer guide, "Supported frameworks, AWS Regions, and instances types" (SMDDP)
    # and the SMDDP release notes. SMDDP's AllGather/AllReduce run only on p4d/p4de (ml.p4d.24xlarge,
    # ml.p4de.24xlarge); 2.3.0 and later refuse to load on other instance types.
    SmddpWheel(
        "2.4.1",
        "cu121",
        "3.11",
        _SMDDP + "/2.4.1/cu121/2024-10-09/smdistributed_dataparallel-2.5.0-cp311-cp311-linux_x86_64.whl",
        True,
    ),
    SmddpWheel(
        "2.3.0",
        "cu121",
        "3.11",
        _SMDDP + "/2.3.0/cu121/2024-05-23/smdistributed_dataparallel-2.3.0-cp311-cp311-linux_x86_64.whl",
        True,
    ),
    SmddpWheel(
        "2.2.0",
        "cu121",
        "3.10",
        _SMDDP + "/2.2.0/cu121/2024-03-04/smdistributed_dataparallel-2.2.0-cp310-cp310-linux_x86_64.whl",
        True,
    ),
    SmddpWheel(
        "2.1.0",
        "cu121",
        "3.10",
        _SMDDP + "/2.1.0/cu121/2024-02-04/smdistributed_dataparallel-2.1.0-cp310-cp310-linux_x86_64.whl",
        True,
    ),
    SmddpWheel(
        "2.0.1",
        "cu118",
        "3.10",
        _SMDDP + "/2.0.1/cu118/2023-12-07/smdistributed_dataparallel-2.0.2-cp310-cp310-linux_x86_64.whl",
        False,
    ),
)

# --- Prometheus agent (release archive) ---------------------------------------------------------------
PROMETHEUS_VERSION = "2.53.4"
"""The Prometheus release a node runs as its metrics agent when its distribution's package is older than
:data:`PROMETHEUS_AGENT_MINIMUM` (Ubuntu 20.04 ships 2.15, 22.04 ships 2.31: HyperPod's AMIs). 2.53 is a
long-term-support line with agent mode and SigV4 remote write."""
PROMETHEUS_AGENT_MINIMUM = (2, 32)
"""Agent mode (``--enable-feature=agent``) arrived in 2.32; SigV4 remote write in 2.26."""
PROMETHEUS_ARCHIVES = {
    "x86_64": (
        "https://github.com/prometheus/prometheus/releases/download/v2.53.4/prometheus-2.53.4.linux-amd64.tar.gz",
        "b8b497c4610d1b93208252b60c8f20f6b2e78596ae8df43397a2e805aa53d475",
    ),
}
"""Machine -> (archive URL, sha256). The checksum is the release's published sha256 for the amd64 archive
as two independent public build files pin it (it could not be downloaded from here); the node refuses an
archive that does not match. No arm64 pin: HyperPod's instance types are x86_64."""

# --- Containers: enroot packages and pyxis source (runtime.containers.install_missing) -----------------


@dataclass(frozen=True)
class Artifact:
    """One file the runtime downloads and checks before it uses it."""

    name: str
    """The pin's name in errors and docs (``enroot``, ``enroot+caps``, ``pyxis``)."""
    url: str
    sha256: Optional[str]
    """None: no published checksum was found for this exact file, so the config must supply one
    (``runtime.containers.<option>``); the node refuses to install it without."""
    option: Optional[str] = None
    """The ``runtime.containers`` option that supplies the checksum when ``sha256`` is None."""


ENROOT_VERSION = "3.4.1"
"""The Enroot release AWS's lifecycle sample installs (``install_enroot_pyxis.sh``, ``ENROOT_VERSION=3.4.1``, in
awslabs/awsome-distributed-ai ``1.architectures/5.sagemaker-hyperpod/LifecycleScripts/base-config/utils``)."""
_ENROOT = "https://github.com/NVIDIA/enroot/releases/download/v{0}/{1}_{0}-1_amd64.deb"
ENROOT_DEBS: Tuple[Artifact, ...] = (
    Artifact("enroot", _ENROOT.format(ENROOT_VERSION, "enroot"), None, "enroot_sha256"),
    Artifact("enroot+caps", _ENROOT.format(ENROOT_VERSION, "enroot+caps"), None, "enroot_caps_sha256"),
)
"""amd64 only (HyperPod's instance types are x86_64). NVIDIA publishes no checksum file next to these packages and
no public build file found pins their sha256, so none is invented here: ``install_missing`` needs the sums in the
config (``enroot_sha256``, ``enroot_caps_sha256``), taken from a download the operator trusts."""
ENROOT_DEPENDENCIES = ("squashfs-tools", "parallel", "fuse-overlayfs", "squashfuse")
"""What AWS's sample installs with enroot (squashfs images, parallel unpacking, rootless overlay mounts)."""

PYXIS_VERSION = "0.24.0"
PYXIS_SOURCE = Artifact(
    "pyxis",
    "https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.24.0.tar.gz",
    "9c4cdb79a67301d8ea05951aa4d2c205f40cf6145e338214b0191add8b36d6c4",
)
"""Pyxis's source archive for its tag. The sha256 is the one two independent public build files pin for this
archive (a Spack recipe and a staged-build script); it could not be downloaded from here. AWS's sample builds
v0.19.0 from a shallow git clone pinned by tag only; no published sum was found for v0.19.0's archive, so the pin
is the newer release that has one. The node refuses an archive that does not match."""
PYXIS_BUILD_PACKAGES = ("gcc", "make")
