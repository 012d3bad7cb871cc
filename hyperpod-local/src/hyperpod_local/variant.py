"""Which HyperPod a local cluster plays: one frozen :class:`Variant`, checked once when it is made.

The six choices that used to be loose keyword arguments of ``LocalCluster.up`` (platform, node names, Slurm
major, automatic topology, preconfigured AMI, stale worker copies) are one value, stored whole in the cluster's
state (:class:`hyperpod_local.state.ClusterState`). ``Variant()`` is what ``hyperpod-local up`` runs by default:
HyperPod's platform with its own names (``ip-a-b-c-d``), Slurm 24.11 and automatic topology, on an older AMI.
A choice the platform cannot have is refused on construction with one line naming the option, the value and what
is allowed (:class:`VariantError`). Stdlib only; imports nothing of the emulator.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from training_runtime.node import GENERIC, HYPERPOD
from training_runtime.node_names import INSTANCE_NAMES, IP_NAMES, NAMING_MODES

PLATFORMS = (HYPERPOD, GENERIC)
"""``hyperpod``: a built root (trixie, Slurm 24.11, unless the cluster picks another major:
:mod:`hyperpod_local.rootfs`), Slurm under /opt/slurm, HyperPod's part emulated. ``generic``: the host's root
and Slurm, or a built root when the cluster picks a major; the runtime does everything (its generic platform)."""
DEFAULT_PLATFORM = HYPERPOD
"""The one default, for ``Variant()`` and ``hyperpod-local up`` alike: what a person trying a config wants to see."""
SLURM_SUITES = {"24.11": "trixie", "26.05": "forky"}
"""Slurm major -> the Debian suite whose root file system carries it (``build-node-rootfs.sh --suite``;
:mod:`hyperpod_local.rootfs` finds or builds it)."""
DEFAULT_SLURM = "24.11"
"""The HyperPod platform's Slurm when a cluster names none: HyperPod's current major."""


class VariantError(ValueError):
    """A variant the emulator cannot play; the message names the option, the value and what is allowed."""


@dataclass(frozen=True)
class Variant:
    """The HyperPod a local cluster plays (``hyperpod-local up``'s ``--platform``, ``--node-names``, ``--slurm``,
    ``--no-automatic-topology``, ``--preconfigured-ami``, ``--stale-worker-copies``). None means the platform's
    own and is resolved on construction, so two variants that run the same cluster are equal."""

    platform: str = DEFAULT_PLATFORM
    """``hyperpod`` emulates HyperPod's part (:mod:`hyperpod_local.hyperpod_platform`; the emulated HyperPod
    agent and ``srun --auto-resume``, :mod:`hyperpod_local.agent`); ``generic`` runs the runtime's generic path."""
    node_names: str | None = None
    """The nodes' host and Slurm names: ``ip`` (HyperPod's default) or ``instance`` (``UseInstanceNames``; the
    generic platform's only naming). None: the platform's own."""
    slurm: str | None = None
    """The Slurm major the nodes run, on the built root file system that carries it (:data:`SLURM_SUITES`).
    None: the platform's own (HyperPod: :data:`DEFAULT_SLURM`; generic: the host's root and Slurm)."""
    automatic_topology: bool = True
    """HyperPod platform: HyperPod's agent writes ``topology.conf`` and sets ``TopologyPlugin=topology/tree``, as
    since 2026-04; False plays an older AMI without it."""
    preconfigured_ami: bool = False
    """HyperPod platform only: the nodes are the 2026 AMI with its preconfigured pieces (:mod:`hyperpod_local.ami`);
    False: an older AMI without them."""
    stale_worker_copies: bool = False
    """HyperPod platform only: non-controller nodes get a stale resource_config.json that still lists a group the
    controller's copy shows empty (:func:`hyperpod_local.layout.stale_instances`)."""

    def __post_init__(self) -> None:
        hyperpod = self.platform == HYPERPOD
        _check("platform", self.platform, PLATFORMS)
        if self.node_names is None:
            object.__setattr__(self, "node_names", IP_NAMES if hyperpod else INSTANCE_NAMES)
        _check("node_names", self.node_names, NAMING_MODES)
        if self.slurm is None and hyperpod:
            object.__setattr__(self, "slurm", DEFAULT_SLURM)
        if self.slurm is not None:
            allowed = tuple(f"{major} (Debian {suite})" for major, suite in SLURM_SUITES.items())
            _check("slurm", self.slurm, tuple(SLURM_SUITES), allowed)
        if not hyperpod:
            for option, wrong, why in (
                ("node_names", self.node_names != INSTANCE_NAMES, "the runtime writes slurm.conf with instance names"),
                ("stale_worker_copies", self.stale_worker_copies, "every node renders slurm.conf from its own copy"),
                ("preconfigured_ami", self.preconfigured_ami, "only the HyperPod platform has HyperPod's AMI"),
            ):
                if wrong:
                    raise VariantError(
                        f"{option}: got {getattr(self, option)!r} on platform {self.platform!r}, which allows only "
                        f"the default ({why}). Fix: platform {HYPERPOD!r}, or leave {option} out"
                    )

    @property
    def naming(self) -> str:
        """The resolved node naming (``ip`` or ``instance``: :mod:`training_runtime.node_names`)."""
        return str(self.node_names)

    @property
    def hyperpod(self) -> bool:
        """Whether HyperPod's part is emulated (the HyperPod platform)."""
        return self.platform == HYPERPOD

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Variant:
        """The variant a state file stored: its ``variant`` object, or (a file from before the value) the flat
        fields it had, with the names each platform always had when it has none."""
        return cls(
            platform=str(data.get("platform", GENERIC)),
            node_names=_optional(data.get("node_names", data.get("naming"))),
            slurm=_optional(data.get("slurm")),
            automatic_topology=bool(data.get("automatic_topology", True)),
            preconfigured_ami=bool(data.get("preconfigured_ami", False)),
            stale_worker_copies=bool(data.get("stale_worker_copies", False)),
        )


def _check(option: str, value: object, allowed: tuple[str, ...], shown: tuple[str, ...] | None = None) -> None:
    if value not in allowed:
        raise VariantError(f"{option}: got {value!r}; allowed: {', '.join(shown or allowed)}")


def _optional(value: object) -> str | None:
    return None if value is None else str(value)
