"""``python3 -m training_runtime scaler {run,once,status}``: the scaler service on the (primary) controller.

* ``run`` loops every ``interval_s`` (what the systemd unit / the emulator's daemon runs);
* ``once`` runs one cycle and prints the heartbeat (for drills and debugging);
* ``status`` prints the heartbeat file and the persisted state (no call to AWS).

Everything comes from the configuration file the bootstrap step writes (``--config``, default
:data:`.config.CONFIG_PATH`); every endpoint, path and interval in it can be overridden here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional

from training_runtime.background import daemonize, name_process
from training_runtime.log import log
from training_runtime.run import Runner
from training_runtime.scaler.config import CONFIG_PATH, ConfigError, ScalerConfig, load_config
from training_runtime.scaler.credentials import RoleCredentials
from training_runtime.scaler.heartbeat import format_heartbeat
from training_runtime.scaler.sagemaker import SageMaker
from training_runtime.scaler.service import Scaler
from training_runtime.scaler.slurm_view import Slurm
from training_runtime.scaler.state import StateError, load

FAILED = 2
PID_FILE = "/run/hyperpod-cdk-scaler.pid"
LOG_FILE = "/var/log/hyperpod-cdk/scaler.log"
PROCESS_NAME = "hpcdk-scaler"


def build(config: ScalerConfig) -> Scaler:
    """The real service for ``config``: IMDS role credentials, the SageMaker endpoint, Slurm's commands."""
    sagemaker = SageMaker(config.endpoint, config.region, RoleCredentials(config.imds_url))
    return Scaler(config, sagemaker, Slurm(Runner(), config.slurm_bin))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m training_runtime scaler", description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["run", "once", "status"])
    p.add_argument("--config", type=Path, default=Path(CONFIG_PATH), help="default %(default)s")
    p.add_argument("--endpoint", help="the SageMaker API URL (default: the config's)")
    p.add_argument("--imds-url", help="the instance metadata service (default: the config's)")
    p.add_argument("--interval", type=float, dest="interval_s", help="seconds between cycles")
    p.add_argument("--tag-interval", type=float, dest="tag_interval_s", help="seconds between heartbeat tags")
    p.add_argument("--minute", type=float, dest="minute_s", help="seconds per idle minute (default 60)")
    p.add_argument("--state", dest="state_path", help="the state file")
    p.add_argument("--heartbeat", dest="heartbeat_path", help="the heartbeat file")
    p.add_argument("--metrics-dir", help="node_exporter's textfile directory")
    p.add_argument("--slurm-bin", help="directory of Slurm's commands")
    p.add_argument("--resource-config", help="HyperPod's resource_config.json")
    p.add_argument("--daemon", action="store_true", help="run: in the background (nodes without systemd)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    overrides = {
        k: getattr(args, k)
        for k in ("endpoint", "imds_url", "interval_s", "tag_interval_s", "minute_s", "state_path",
                  "heartbeat_path", "metrics_dir", "slurm_bin", "resource_config")
    }  # fmt: skip
    try:
        config = load_config(args.config).with_overrides(**overrides)
        if args.command == "status":
            return status(config)
        scaler = build(config)
    except (ConfigError, StateError) as error:
        sys.stderr.write("scaler: {}\n".format(error))
        return FAILED
    log("scaler_start", cluster=config.cluster_name, endpoint=config.endpoint, groups=[g.name for g in config.groups])
    if args.command == "once":
        print(format_heartbeat(scaler.cycle()))
        return 0
    if args.daemon:
        daemonize(Path(PID_FILE), Path(LOG_FILE), PROCESS_NAME)
    else:
        name_process(PROCESS_NAME)
    scaler.run()
    return 0


def status(config: ScalerConfig) -> int:
    try:
        beat = Path(config.heartbeat_path).read_text().strip()
    except OSError:
        beat = "(no heartbeat yet: {})".format(config.heartbeat_path)
    print("heartbeat: " + beat)
    print(json.dumps(load(Path(config.state_path)).to_json(), indent=1, sort_keys=True))
    return 0
