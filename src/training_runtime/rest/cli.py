"""``python3 -m training_runtime rest {serve,refresh-key}`` on the controller.

* ``serve`` runs the REST endpoint (:mod:`.server`): the systemd unit runs it, ``--daemon`` puts it in the background
  where there is no systemd (the local cluster).
* ``refresh-key`` installs the secret's current key when it changed (:mod:`.rotate`); the timer runs it. Exit 0 and a
  JSON line ``{"event": "key", "result": "unchanged"|"rotated"}``; 2 and one line naming the failure and the fix.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional

from training_runtime.rest.config import CONFIG_PATH, RestConfigError, RestServiceConfig
from training_runtime.rest.rotate import refresh
from training_runtime.rest.secret import SecretError
from training_runtime.run import CommandError

FAILED = 2


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m training_runtime rest")
    parser.add_argument("command", choices=["serve", "refresh-key"])
    parser.add_argument("--config", type=Path, default=Path(CONFIG_PATH))
    parser.add_argument("--daemon", action="store_true", help="serve: in the background (nodes without systemd)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        config = RestServiceConfig.loads(args.config.read_text())
    except (OSError, RestConfigError) as error:
        sys.stderr.write("rest {}: {}\n".format(args.command, error))
        return FAILED
    if args.command == "serve":
        from training_runtime.rest.server import serve

        return serve(config, daemon=args.daemon)
    try:
        result = refresh(config)
    except (SecretError, CommandError, OSError) as error:
        print(json.dumps({"event": "key", "result": "failed", "error": str(error)}, sort_keys=True), flush=True)
        sys.stderr.write("rest refresh-key: {}\n".format(error))
        return FAILED
    print(json.dumps({"event": "key", "result": result}, sort_keys=True), flush=True)
    return 0
