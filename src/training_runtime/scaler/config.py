"""The scaler service's configuration file: everything it needs, resolved once by the bootstrap step
(:mod:`training_runtime.steps.scaler`) so the service reads one file and imports no bootstrap machinery.

Every endpoint, path and interval is here (and may be overridden on the command line), so the local cluster
and the tests point the service wherever they need it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from training_runtime.metrics.layout import TEXTFILE_DIR
from training_runtime.node_names import NAMING_MODES
from training_runtime.paths import RESOURCE_CONFIG_PATH
from training_runtime.scaler.heartbeat import HEARTBEAT_PATH
from training_runtime.scaler.state import STATE_PATH
from training_runtime.scaling import ScalingSpec, parse_scaling
from training_runtime.spot import IMDS_URL

CONFIG_PATH = "/etc/hyperpod-cdk/scaler.json"
DEFAULT_INTERVAL_S = 60.0
DEFAULT_TAG_INTERVAL_S = 300.0
MINUTE_S = 60.0
"""Seconds in one of ``scaling.idle_minutes``; only the local cluster's drills shorten it (``minute_s``)."""


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class ScaledGroupConfig:
    name: str
    partition: str
    scaling: ScalingSpec


@dataclass(frozen=True)
class ScalerConfig:
    cluster_name: str
    cluster_arn: str
    region: str
    endpoint: str
    """``https://api.sagemaker.<region>.amazonaws.com/`` on AWS; the emulated control plane's URL locally."""
    naming: str
    """``ip`` or ``instance``: how Slurm names the nodes (:mod:`training_runtime.node_names`)."""
    groups: Tuple[ScaledGroupConfig, ...]
    imds_url: str = IMDS_URL
    interval_s: float = DEFAULT_INTERVAL_S
    tag_interval_s: float = DEFAULT_TAG_INTERVAL_S
    minute_s: float = MINUTE_S
    """Seconds per idle minute: 60, or the emulator's shorter minute (``hyperpod_cdk.emulation.scaler_minute_s``)."""
    resource_config: str = RESOURCE_CONFIG_PATH
    state_path: str = STATE_PATH
    heartbeat_path: str = HEARTBEAT_PATH
    metrics_dir: str = TEXTFILE_DIR
    slurm_bin: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        return {
            "cluster_name": self.cluster_name,
            "cluster_arn": self.cluster_arn,
            "region": self.region,
            "endpoint": self.endpoint,
            "naming": self.naming,
            "groups": [dict(name=g.name, partition=g.partition, **g.scaling.to_json()) for g in self.groups],
            "imds_url": self.imds_url,
            "interval_s": self.interval_s,
            "tag_interval_s": self.tag_interval_s,
            "minute_s": self.minute_s,
            "resource_config": self.resource_config,
            "state_path": self.state_path,
            "heartbeat_path": self.heartbeat_path,
            "metrics_dir": self.metrics_dir,
            "slurm_bin": self.slurm_bin,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n"

    def with_overrides(self, **changes: Any) -> "ScalerConfig":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_json(cls, data: Any) -> "ScalerConfig":
        problems: List[str] = []
        if not isinstance(data, dict):
            raise ConfigError("expected a JSON object")
        for key in ("cluster_name", "cluster_arn", "region", "endpoint", "naming"):
            if not isinstance(data.get(key), str) or not data.get(key):
                problems.append("{}: got {!r}; expected a non-empty string".format(key, data.get(key)))
        if data.get("naming") not in NAMING_MODES:
            problems.append("naming: got {!r}; allowed: {}".format(data.get("naming"), ", ".join(NAMING_MODES)))
        groups = []
        for index, raw in enumerate(data.get("groups") or []):
            where = "groups[{}]".format(index)
            spec = parse_scaling({k: v for k, v in raw.items() if k in ("min", "max", "idle_minutes")}, where, problems)
            if not raw.get("name") or not raw.get("partition"):
                problems.append("{}: name and partition are required".format(where))
            elif spec is not None:
                groups.append(ScaledGroupConfig(str(raw["name"]), str(raw["partition"]), spec))
        if problems:
            raise ConfigError("; ".join(problems))
        optional = {}
        for key in ("imds_url", "resource_config", "state_path", "heartbeat_path", "metrics_dir", "slurm_bin"):
            if isinstance(data.get(key), str):
                optional[key] = data[key]
        for key in ("interval_s", "tag_interval_s", "minute_s"):
            if isinstance(data.get(key), (int, float)) and data[key] > 0:
                optional[key] = float(data[key])
        return cls(
            cluster_name=data["cluster_name"],
            cluster_arn=data["cluster_arn"],
            region=data["region"],
            endpoint=data["endpoint"],
            naming=data["naming"],
            groups=tuple(groups),
            **optional,
        )


def load_config(path: Path) -> ScalerConfig:
    try:
        return ScalerConfig.from_json(json.loads(path.read_text()))
    except OSError as error:
        raise ConfigError("{}: {}".format(path, error.strerror)) from None
    except ValueError as error:
        raise ConfigError("{}: {}".format(path, error)) from None


def endpoint_of(region: str, sagemaker_url: Optional[str]) -> str:
    """The emulated control plane's URL when the parameters name one, else AWS's regional endpoint."""
    return sagemaker_url or "https://api.sagemaker.{}.amazonaws.com/".format(region)
