"""``python3 -m training_runtime bootstrap``: entry point the lifecycle scripts call on every node.

This release validates the node's inputs (the parameters contract and HyperPod's resource config)
and reports which instance group and Slurm role the node has; configuration steps build on it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from training_runtime.params import PARAMETERS_FILE_BY_MODE, ParametersError, ProvisioningParameters

DEFAULT_RESOURCE_CONFIG = "/opt/ml/config/resource_config.json"


def log(event: str, **fields: Any) -> None:
    """One JSON object per line on stdout (HyperPod ships stdout to CloudWatch)."""
    record: Dict[str, Any] = {"ts": round(time.time(), 3), "event": event}
    record.update(fields)
    print(json.dumps(record, sort_keys=True), flush=True)


def find_parameters(directory: Path) -> Path:
    for name in sorted(set(PARAMETERS_FILE_BY_MODE.values())):
        if (directory / name).is_file():
            return directory / name
    raise ParametersError(
        [
            "no parameters file in {} (looked for {}). Fix: deploy the lifecycle prefix with the "
            "hyperpod-cdk LifecycleScripts construct".format(
                directory, ", ".join(sorted(PARAMETERS_FILE_BY_MODE.values()))
            )
        ]
    )


def node_group(resource_config: Dict[str, Any], own_ips: List[str]) -> Optional[str]:
    """The instance group whose instance list holds one of this node's IP addresses."""
    for group in resource_config.get("InstanceGroups") or []:
        for instance in group.get("Instances") or []:
            if instance.get("CustomerIpAddress") in own_ips:
                return str(group.get("Name"))
    return None


def own_ips() -> List[str]:
    """This node's addresses (``hostname -I``); empty when they cannot be read."""
    try:
        result = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return result.stdout.split()


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m training_runtime")
    parser.add_argument("command", choices=["bootstrap", "validate"])
    parser.add_argument("--assets-dir", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument(
        "--resource-config",
        type=Path,
        default=Path(os.environ.get("SAGEMAKER_RESOURCE_CONFIG_PATH", DEFAULT_RESOURCE_CONFIG)),
    )
    parser.add_argument("--ip", action="append", default=[], help="this node's IP (default: from hostname -I)")
    args = parser.parse_args(argv)
    try:
        params = ProvisioningParameters.loads(find_parameters(args.assets_dir).read_text())
    except (OSError, ParametersError) as error:
        log("failed", step="parameters", error=str(error))
        return 2
    log("parameters", cluster=params.cluster_name, mode=params.mode, groups=[g.name for g in params.groups])
    if args.command == "validate":
        return 0
    try:
        resource_config = json.loads(args.resource_config.read_text())
    except (OSError, ValueError) as error:
        log("failed", step="resource_config", path=str(args.resource_config), error=str(error))
        return 2
    ips = args.ip or own_ips()
    name = node_group(resource_config, ips)
    group = params.group(name) if name else None
    if group is None:
        log(
            "failed",
            step="role",
            error="this node ({}) is in no instance group the parameters know".format(ips),
        )
        return 2
    log("role", group=group.name, role=group.role, instance_type=group.instance_type)
    log("done", steps=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
