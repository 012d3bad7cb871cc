"""One JSON object per line on stdout for every event (HyperPod ships a node's stdout to CloudWatch).

Never pass a secret as a field: nothing here redacts.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Dict

FAILURE_MARKER = "hyperpod-cdk: FAILED"
"""Starts the one line that says why a run failed (stderr; the lifecycle entry scripts repeat it last, with
where the full log is). CloudWatch alarms on the lifecycle log group match it (constructs/alert_rules.py)."""


def log(event: str, **fields: Any) -> None:
    record: Dict[str, Any] = {"ts": round(time.time(), 3), "event": event}
    record.update(fields)
    sys.stdout.write(json.dumps(record, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()
