"""AWS's neuron-monitor Prometheus bridge (``neuron-monitor-prometheus.py``), run with its HTTP server bound to one
address: the script takes only ``--port`` and listens on every address.

``python3 -m training_runtime.metrics.neuron_bridge --listen 127.0.0.1 SCRIPT [ARGS...]`` runs SCRIPT as
``__main__`` with ARGS, after making ``prometheus_client.start_http_server`` bind ``--listen`` whatever address the
script asks for. Runs on the node's system Python (3.8+), which has ``prometheus_client`` (the bridge needs it).
"""

from __future__ import annotations

import importlib
import runpy
import sys
from typing import Any, Callable, List, Optional


def bound_to(listen: str, start: Callable[..., Any]) -> Callable[..., Any]:
    """``start`` (prometheus_client's ``start_http_server(port, addr=..., ...)``) with its address fixed."""

    def start_http_server(port: int, addr: str = "", *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("addr", None)
        return start(port, listen, *args, **kwargs)

    return start_http_server


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or argv[0] != "--listen":
        print("usage: python3 -m training_runtime.metrics.neuron_bridge --listen ADDRESS SCRIPT [ARGS...]")
        return 2
    listen, script, rest = argv[1], argv[2], argv[3:]
    # The system's python3-prometheus-client, which the bridge itself imports (not a dependency of the runtime).
    client = importlib.import_module("prometheus_client")
    exposition = importlib.import_module("prometheus_client.exposition")
    bound = bound_to(listen, exposition.start_http_server)
    setattr(client, "start_http_server", bound)  # noqa: B010 (a module mypy cannot see)
    setattr(exposition, "start_http_server", bound)  # noqa: B010
    sys.argv = [script, *rest]
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
