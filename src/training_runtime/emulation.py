"""``hyperpod_cdk.emulation``: what only the local cluster (``hyperpod_local``) writes into the parameters file.

The emulator's knobs are not runtime options: the CDK builder (``hyperpod_cdk.core.parameters``) has no argument for
this key, so a deployed cluster's file never carries it and a config cannot reach it. Absent, a node runs as on
HyperPod. Runs on the node's system Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

EMULATION_KEY = "emulation"
"""The key under ``hyperpod_cdk`` in the parameters file."""


@dataclass(frozen=True)
class Emulation:
    """How the local cluster's nodes differ from HyperPod's."""

    hardware: bool = False
    """The instance types' GPUs, Neuron devices and EFA interfaces are declared, not present: the health checks
    skip them, saying so, the launcher runs CPU processes, and Slurm counts declared GPUs without device files."""
    imds_url: Optional[str] = None
    """The instance metadata service the Spot interruption watcher reads (the emulator's fake); None: EC2's
    (:data:`training_runtime.spot.IMDS_URL`)."""
    sagemaker_url: Optional[str] = None
    """The SageMaker API endpoint the node's AWS calls go to (the emulator's control plane,
    ``hyperpod_local.control_plane``); None: AWS's regional endpoint."""
    secretsmanager_url: Optional[str] = None
    """The Secrets Manager endpoint the node's GetSecretValue calls go to (the REST API's key on the controller, the
    directory's bind password on every node; the emulator's control plane answers them, ``hyperpod_local``); None:
    AWS's regional endpoint."""
    scaler_interval_s: Optional[float] = None
    """Seconds between the capacity scaler's cycles (the drills' seconds, not AWS's minute); None: the service's
    default (:data:`training_runtime.scaler.config.DEFAULT_INTERVAL_S`)."""
    scaler_minute_s: Optional[float] = None
    """How many seconds the scaler counts as one of a group's ``idle_minutes`` (``scaling.idle_minutes`` is whole
    minutes >= 1 in the config; the drills shorten the minute instead); None: 60."""
    exporters_on_network: bool = False
    """The metrics exporters listen on every address, for the local cluster's Prometheus, which scrapes each node
    over the bridge. False: 127.0.0.1 only, as on HyperPod, where each node's own agent is their one reader."""

    def to_json(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {"hardware": self.hardware}
        if self.imds_url is not None:
            data["imds_url"] = self.imds_url
        if self.sagemaker_url is not None:
            data["sagemaker_url"] = self.sagemaker_url
        if self.secretsmanager_url is not None:
            data["secretsmanager_url"] = self.secretsmanager_url
        for key in SECONDS_KEYS:
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.exporters_on_network:
            data["exporters_on_network"] = True
        return data


KEYS = (
    "hardware",
    "imds_url",
    "sagemaker_url",
    "secretsmanager_url",
    "scaler_interval_s",
    "scaler_minute_s",
    "exporters_on_network",
)
URL_KEYS = {
    "imds_url": "the metadata service",
    "sagemaker_url": "the SageMaker API endpoint",
    "secretsmanager_url": "the Secrets Manager endpoint",
}
SECONDS_KEYS = {"scaler_interval_s": "the scaler's cycle", "scaler_minute_s": "the scaler's minute"}


def parse_emulation(raw: Any, path: str, problems: List[str]) -> Optional[Emulation]:
    """The emulation of a parameters file's ``raw`` value (None or absent: none); problems are appended."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        problems.append("{}: got {!r}; expected an object or null".format(path, raw))
        return None
    before = len(problems)
    for key in raw:
        if key not in KEYS:
            problems.append("{}.{}: unknown key; allowed: {}".format(path, key, ", ".join(KEYS)))
    hardware = raw.get("hardware", False)
    on_network = raw.get("exporters_on_network", False)
    for key, value in (("hardware", hardware), ("exporters_on_network", on_network)):
        if not isinstance(value, bool):
            problems.append("{}.{}: got {!r}; expected true or false".format(path, key, value))
    for key, what in URL_KEYS.items():
        url = raw.get(key)
        if url is not None and (not isinstance(url, str) or not url.startswith("http://")):
            problems.append("{}.{}: got {!r}; expected an http:// URL of {}".format(path, key, url, what))
    for key, what in SECONDS_KEYS.items():
        seconds = raw.get(key)
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0):
            problems.append(
                "{}.{}: got {!r}; expected a positive number of seconds ({})".format(path, key, seconds, what)
            )
    if len(problems) != before:
        return None
    return Emulation(
        hardware=hardware,
        imds_url=raw.get("imds_url"),
        sagemaker_url=raw.get("sagemaker_url"),
        secretsmanager_url=raw.get("secretsmanager_url"),
        scaler_interval_s=None if raw.get("scaler_interval_s") is None else float(raw["scaler_interval_s"]),
        scaler_minute_s=None if raw.get("scaler_minute_s") is None else float(raw["scaler_minute_s"]),
        exporters_on_network=on_network,
    )
