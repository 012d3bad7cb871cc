"""scripts/plot_dashboards.py against a fake of Prometheus' HTTP API (query_range, label values) on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from hyperpod_cdk.observability import DASHBOARDS, dashboard_json, panel_queries

ROOT = Path(__file__).resolve().parent.parent
START, END, STEP = 1_800_000_000, 1_800_003_600, 60  # a fake Prometheus answers any range; the script takes `now`
JOB_IDS = ["7", "12", "3"]


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class FakePrometheus(ThreadingHTTPServer):
    """A fake of Prometheus' HTTP API: each range query answers two series whose values number the query."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.answers: dict[str, list[dict[str, Any]]] = {}
        self.refuse: str | None = None
        """A query containing this text gets Prometheus' answer to a bad query (HTTP 400, status error)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def range_queries(self) -> list[str]:
        return [params["query"][0] for path, params in self.requests if path == "/api/v1/query_range"]

    def answer(self, path: str, params: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        self.requests.append((path, params))
        if path == "/api/v1/label/job_id/values":
            return 200, {"status": "success", "data": JOB_IDS}
        if path != "/api/v1/query_range":
            return 404, {"status": "error", "errorType": "not_found", "error": f"no {path}"}
        query = params["query"][0]
        if self.refuse and self.refuse in query:
            return 400, {"status": "error", "errorType": "bad_data", "error": "1:1: parse error: unexpected"}
        start, end, step = (float(params[k][0]) for k in ("start", "end", "step"))
        number = len(self.answers)
        self.answers[query] = [
            {
                "metric": {"instance": f"node-{k}", "state": "idle", "gpu": str(k)},
                "values": [[start + j * step, str(number * 10 + k + j)] for j in range(int((end - start) / step) + 1)],
            }
            for k in range(2)
        ]
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": self.answers[query]}}


class _Handler(BaseHTTPRequestHandler):
    server: FakePrometheus

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        status, body = self.server.answer(url.path, urllib.parse.parse_qs(url.query))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[FakePrometheus]:
    server = FakePrometheus()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def plot() -> ModuleType:
    return _script("plot_dashboards")


def window(plot: ModuleType) -> Any:
    return plot.Window(start=START, end=END, step=STEP)


def args(url: str, out: Path, *more: str) -> list[str]:
    return [
        "--prometheus",
        url,
        "--start",
        str(START),
        "--end",
        str(END),
        "--step",
        f"{STEP}s",
        "--out",
        str(out),
        *more,
    ]


def test_every_panel_query_runs_as_a_range_query_and_each_dashboard_is_drawn(
    plot: ModuleType, prometheus: FakePrometheus, tmp_path: Path
) -> None:
    assert plot.main(args(prometheus.url, tmp_path)) == 0
    variables = {"cluster": ".*", "job_id": "12"}  # "All" clusters; the highest job id the data has
    expected = [
        window(plot).render(q.expr, variables) for name in DASHBOARDS for q in panel_queries(dashboard_json(name))
    ]
    assert prometheus.range_queries() == expected
    for path, params in prometheus.requests:
        if path == "/api/v1/query_range":
            assert (params["start"], params["end"], params["step"]) == ([str(START)], [str(END)], [str(STEP)])
    assert ("/api/v1/label/job_id/values", {"match[]": ['slurm_job_nodes{cluster=~".*"}'], "start": [str(START)],
            "end": [str(END)]}) in prometheus.requests  # fmt: skip
    for name in DASHBOARDS:
        assert (tmp_path / f"{name}.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_each_panel_is_a_plot_of_its_queries_series(plot: ModuleType, prometheus: FakePrometheus) -> None:
    model = dashboard_json("cluster-overview")
    figure = plot.plot_dashboard(model, plot.Prometheus(prometheus.url), window(plot), {})
    queries = panel_queries(model)
    titles = list(dict.fromkeys(q.panel for q in queries))
    assert [axes.get_title() for axes in figure.axes] == titles
    for axes, title in zip(figure.axes, titles, strict=True):
        panel = [q for q in queries if q.panel == title]
        answers = [s for q in panel for s in prometheus.answers[window(plot).render(q.expr, {"cluster": ".*"})]]
        lines = axes.get_lines()
        assert [[float(v) for v in line.get_ydata()] for line in lines] == [
            [float(v) for _, v in s["values"]] for s in answers
        ]
    by_state = figure.axes[titles.index("Nodes by state")]
    assert [line.get_label() for line in by_state.get_lines()] == ["idle", "idle"]  # legend format {{state}}
    by_node = figure.axes[titles.index("CPU use by node")]
    assert [line.get_label() for line in by_node.get_lines()] == ["node-0", "node-1"]


def test_a_given_variable_wins_over_the_data(plot: ModuleType, prometheus: FakePrometheus, tmp_path: Path) -> None:
    assert plot.main(args(prometheus.url, tmp_path, "--dashboard", "job", "--var", "job_id=3")) == 0
    assert all('job_id="3"' in q for q in prometheus.range_queries())
    assert not any(path.startswith("/api/v1/label/") for path, _ in prometheus.requests)


def test_a_query_prometheus_refuses_is_named_with_its_panel(
    plot: ModuleType, prometheus: FakePrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prometheus.refuse = "slurm_scheduler_queue_length"
    assert plot.main(args(prometheus.url, tmp_path, "--dashboard", "cluster-overview")) == 1
    error = capsys.readouterr().err
    assert "dashboard 'HyperPod cluster overview', panel 'Scheduler queue length', query A" in error
    assert "1:1: parse error: unexpected" in error
    assert not (tmp_path / "cluster-overview.png").exists()


def test_an_unreachable_prometheus_is_a_clear_error(
    plot: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert plot.main(args(f"http://127.0.0.1:{port}", tmp_path, "--dashboard", "node-health")) == 1
    assert f"cannot reach Prometheus at http://127.0.0.1:{port}" in capsys.readouterr().err


def test_the_range_defaults_to_the_last_duration_before_now(
    plot: ModuleType, prometheus: FakePrometheus, tmp_path: Path
) -> None:
    argv = ["--prometheus", prometheus.url, "--dashboard", "node-health", "--last", "1h30m", "--out", str(tmp_path)]
    assert plot.main(argv, now=END) == 0
    ranges = {(p["start"][0], p["end"][0], p["step"][0]) for path, p in prometheus.requests if "query_range" in path}
    assert ranges == {(str(END - 5400), str(END), str(5400 // 240 + 1))}


@pytest.mark.parametrize("text", ["1x", "30", "m", "1h 30m"])
def test_a_bad_duration_says_what_is_allowed(plot: ModuleType, text: str) -> None:
    with pytest.raises(Exception, match=f"{text!r} is not a duration like 30m, 1h or 1h30m"):
        plot.duration(text)
