"""The metrics steps on a fake root: which nodes run what, how they are configured, the agent's remote
write, the pinned Prometheus archive, the prolog/epilog wiring of the GPU-to-job mapping, the options
and the parameters file's metrics target. Stdlib and pytest only (runs on 3.8)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest

from runtime_fakes import CLUSTER_GROUPS, RecordingRunner, fake_node, touch
from training_runtime.accelerators import Accelerators
from training_runtime.emulation import Emulation
from training_runtime.errors import StepFailed
from training_runtime.groups import GroupSpec
from training_runtime.metrics.catalog import dcgm_counters_csv
from training_runtime.metrics.layout import GPU_JOB_DIR, TEXTFILE_DIR
from training_runtime.options import OptionsError, parse_options
from training_runtime.params import MetricsTarget, ParametersError, ProvisioningParameters
from training_runtime.steps import observability as obs
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.health import EPILOG_PROGRAM, PROLOG_PROGRAM, HealthPrograms, health_steps
from training_runtime.steps.slurm import settings

URL = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1234/api/v1/remote_write"
TARGET = MetricsTarget(URL, "us-east-1")
NONE = Accelerators()
GPU_GROUPS = (
    GroupSpec("controller", "controller", "ml.m5.xlarge"),
    GroupSpec("login", "login", "ml.m5.large"),
    GroupSpec("workers", "compute", "ml.p4d.24xlarge", "gpu"),
)


def node_with(tmp: Path, instance: str = "workers-1", metrics: Any = None, options: Any = None, groups=CLUSTER_GROUPS):  # type: ignore[no-untyped-def]
    params = ProvisioningParameters(
        cluster_name="test",
        mode="lifecycle-driven",
        groups=tuple(groups),
        fsx_dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        fsx_mountname="abcdefgh",
        metrics=metrics,
        options=dict(options or {}),
    )
    return fake_node(tmp, instance=instance, params=params)


def names(steps: list[Any]) -> list[str]:
    return [s.name for s in steps]


def files_of(steps: list[Any]) -> dict[str, str]:
    return {path: content for s in steps if isinstance(s, obs.Files) for path, content, _ in s.files}


def test_every_node_runs_node_exporter_and_only_the_controller_collects_slurm(tmp_path: Path) -> None:
    worker = obs.observability_steps(node_with(tmp_path / "w"), NONE)
    controller = obs.observability_steps(node_with(tmp_path / "c", instance="controller-1"), NONE)
    assert names(worker) == [
        "install:prometheus-node-exporter",
        "node-exporter-config",
        "daemon:prometheus-node-exporter",
    ]
    assert names(controller)[3:] == ["metrics-collector", "daemon:" + obs.COLLECTOR]
    program = files_of(controller)[obs.COLLECTOR_PROGRAM]
    assert "-m training_runtime.metrics.collect --slurm --loop 15" in program and "--efa" not in program


def test_without_a_target_exporters_stay_on_loopback_and_no_agent_runs(tmp_path: Path) -> None:
    """Nothing on HyperPod scrapes a node from the network: without a target nobody reads the exporters, and the
    Slurm metrics name users and jobs (review finding L4)."""
    steps = obs.observability_steps(node_with(tmp_path), NONE)
    args = files_of(steps)[obs.NODE_EXPORTER_ARGS]
    assert f'ARGS="--web.listen-address=127.0.0.1:9100 --collector.textfile.directory={TEXTFILE_DIR}"' in args
    assert not any(n.startswith("metrics-agent") for n in names(steps))


def test_only_the_local_clusters_emulation_opens_the_exporters_to_its_network(tmp_path: Path) -> None:
    emulation = Emulation(hardware=True, exporters_on_network=True)
    params = dataclasses.replace(node_with(tmp_path / "a").params, emulation=emulation)
    node = fake_node(tmp_path / "b", instance="workers-1", params=params)
    steps = obs.observability_steps(node, Accelerators(nvidia_gpus=8, neuron_devices=16))
    files = files_of(steps)
    assert "--web.listen-address=:9100 " in files[obs.NODE_EXPORTER_ARGS]
    assert " -a :9400 " in files[obs.DCGM_DROP_IN]
    assert "--listen 0.0.0.0 " in files[obs.NEURON_BRIDGE_PROGRAM]


def test_with_a_target_exporters_listen_on_loopback_and_the_agent_remote_writes_with_sigv4(tmp_path: Path) -> None:
    node = node_with(tmp_path, metrics=TARGET, options={"observability": {"scrape_interval": 30}})
    steps = obs.observability_steps(node, Accelerators(nvidia_gpus=8))
    files = files_of(steps)
    assert "--web.listen-address=127.0.0.1:9100" in files[obs.NODE_EXPORTER_ARGS]
    config = json.loads(files[obs.AGENT_CONFIG].split("\n", 1)[1])
    assert config["remote_write"] == [{"url": URL, "sigv4": {"region": "us-east-1"}}]
    assert config["global"]["scrape_interval"] == "30s"
    jobs = {c["job_name"]: c["static_configs"][0] for c in config["scrape_configs"]}
    assert {j: c["targets"] for j, c in jobs.items()} == {"node": ["127.0.0.1:9100"], "dcgm": ["127.0.0.1:9400"]}
    assert jobs["node"]["labels"] == {
        "cluster": "test",
        "instance": "workers-1",
        "instance_group": "workers",
        "role": "compute",
    }
    unit = files[f"{obs.UNIT_DIR}/{obs.AGENT}.service"]
    assert "--enable-feature=agent" in unit and "--web.listen-address=127.0.0.1:9090" in unit


def test_the_agent_uses_the_distributions_prometheus_only_from_2_32(tmp_path: Path) -> None:
    touch(tmp_path, "/usr/bin/prometheus").chmod(0o755)
    for output, archive in (
        ("prometheus, version 2.31.2+ds1 (branch)", True),
        ("prometheus, version 2.42.0+ds", False),
    ):
        node = node_with(tmp_path, metrics=TARGET)
        node.runner = RecordingRunner({("/usr/bin/prometheus", "--version"): (0, output)})
        steps = obs.observability_steps(node, NONE)
        assert ("prometheus-archive" in names(steps)) is archive
        binary = obs.AGENT_ARCHIVE_DIR + "/prometheus" if archive else "/usr/bin/prometheus"
        assert f"ExecStart={binary} --enable-feature=agent" in files_of(steps)[f"{obs.UNIT_DIR}/{obs.AGENT}.service"]


def archive_bytes() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        data = b"#!/bin/sh\necho prometheus\n"
        info = tarfile.TarInfo("prometheus-9.9.9.linux-amd64/prometheus")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize("matches", [True, False])
def test_the_archive_is_installed_only_when_its_sha256_matches_the_pin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, matches: bool
) -> None:
    data = archive_bytes()
    pin = hashlib.sha256(data).hexdigest() if matches else "0" * 64
    monkeypatch.setattr(obs, "PROMETHEUS_ARCHIVES", {os.uname().machine: ("https://example.com/p.tar.gz", pin)})
    node = node_with(tmp_path)
    assert isinstance(node.runner, RecordingRunner)
    node.runner.hooks.append(
        lambda argv: Path(argv[argv.index("--output") + 1]).write_bytes(data) if argv[0] == "curl" else None
    )
    step = obs.PrometheusArchive()
    binary = node.path(step.BINARY)
    if matches:
        step.apply(node)
        assert binary.read_bytes() == b"#!/bin/sh\necho prometheus\n" and not step.needed(node)
    else:
        with pytest.raises(StepFailed, match=r"sha256 .* but the pin"):
            step.apply(node)
        assert not binary.exists()


def test_nvidia_nodes_run_dcgm_exporter_with_the_catalog_counters_and_the_job_mapping(tmp_path: Path) -> None:
    steps = obs.observability_steps(node_with(tmp_path), Accelerators(nvidia_gpus=8))
    assert "install:" + obs.DCGM_EXPORTER_PACKAGE in names(steps) and "daemon:" + obs.DCGM_EXPORTER in names(steps)
    files = files_of(steps)
    assert files[obs.DCGM_COUNTERS] == dcgm_counters_csv()
    exec_start = files[obs.DCGM_DROP_IN].splitlines()[-1]
    assert exec_start == (
        f"ExecStart=/usr/bin/dcgm-exporter -f {obs.DCGM_COUNTERS} -a 127.0.0.1:9400 -r localhost:5555 "
        f"--hpc-job-mapping-dir {GPU_JOB_DIR}"
    )
    off = obs.observability_steps(
        node_with(tmp_path, options={"observability": {"dcgm_exporter": False}}), Accelerators(nvidia_gpus=8)
    )
    assert not any("dcgm" in n for n in names(off))


def test_neuron_and_efa_nodes_get_their_metrics(tmp_path: Path) -> None:
    steps = obs.observability_steps(node_with(tmp_path), Accelerators(neuron_devices=16, efa=8))
    files = files_of(steps)
    assert (
        "/bin/sh -c '/opt/aws/neuron/bin/neuron-monitor | /opt/hyperpod-cdk/bin/neuron-monitor-prometheus'"
        in files[f"{obs.UNIT_DIR}/{obs.NEURON_MONITOR}.service"]
    )
    bridge = files[obs.NEURON_BRIDGE_PROGRAM]
    assert bridge.endswith(
        "-m training_runtime.metrics.neuron_bridge --listen 127.0.0.1 /opt/aws/neuron/bin/neuron-monitor-prometheus.py"
        ' --port 8000 "$@"\n'
    )
    assert "--efa --loop 15" in files[obs.COLLECTOR_PROGRAM] and "--slurm" not in files[obs.COLLECTOR_PROGRAM]


def test_hyperpod_controllers_collect_with_hyperpods_slurm_commands(tmp_path: Path) -> None:
    node = node_with(tmp_path, instance="controller-1")
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True)
    program = files_of(obs.observability_steps(node, NONE))[obs.COLLECTOR_PROGRAM]
    assert "--slurm --slurm-bin /opt/slurm/bin --loop 15" in program


def test_observability_off_means_no_metrics_steps(tmp_path: Path) -> None:
    node = node_with(tmp_path, options={"observability": {"enabled": False}})
    assert obs.observability_steps(node, Accelerators(nvidia_gpus=8, efa=4)) == []
    assert not any(n.startswith(("daemon:prometheus", "metrics")) for n in names(steps_for(node)))


def test_files_converge_and_units_reload_systemd_only_when_changed(tmp_path: Path) -> None:
    node = node_with(tmp_path, instance="controller-1")
    (tmp_path / "run/systemd/system").mkdir(parents=True)
    step = next(s for s in obs.observability_steps(node, NONE) if s.name == "metrics-collector")
    assert step.needed(node)
    step.apply(node)
    assert not step.needed(node) and node.runner.ran("systemctl", "daemon-reload")  # type: ignore[attr-defined]
    runner = RecordingRunner()
    node.runner = runner
    step.apply(node)
    assert runner.commands == []


# --- the GPU-to-job mapping in the prolog and epilog ------------------------------------------------------


def test_gpu_clusters_map_jobs_in_the_prolog_before_the_health_check(tmp_path: Path) -> None:
    node = node_with(tmp_path, groups=GPU_GROUPS)
    wanted = {path: content for path, content, _ in HealthPrograms().files(node)}
    prolog = wanted[PROLOG_PROGRAM].splitlines()
    assert "training_runtime.metrics.gpu_jobs --prolog" in prolog[2] and "training_runtime.health --prolog" in prolog[3]
    assert "training_runtime.metrics.gpu_jobs --epilog" in wanted[EPILOG_PROGRAM]
    assert (settings(node).prolog, settings(node).epilog) == (PROLOG_PROGRAM, EPILOG_PROGRAM)


def test_the_mapping_keeps_a_prolog_when_health_checks_are_off(tmp_path: Path) -> None:
    node = node_with(tmp_path, groups=GPU_GROUPS, options={"health": {"enabled": False}})
    wanted = {path: content for path, content, _ in HealthPrograms().files(node)}
    assert wanted[PROLOG_PROGRAM].splitlines()[-1] == "exit 0" and len(health_steps(node)) == 1
    assert settings(node).health_check_program is None and settings(node).prolog == PROLOG_PROGRAM


def test_cpu_clusters_and_dcgm_off_change_nothing_in_slurm_conf(tmp_path: Path) -> None:
    for node in (
        node_with(
            tmp_path / "cpu",
            groups=(
                GroupSpec("controller", "controller", "ml.m5.xlarge"),
                GroupSpec("workers", "compute", "ml.c5.4xlarge", "cpu"),
            ),
        ),
        node_with(tmp_path / "off", groups=GPU_GROUPS, options={"observability": {"dcgm_exporter": False}}),
    ):
        assert settings(node).epilog is None
        assert "gpu_jobs" not in {p: c for p, c, _ in HealthPrograms().files(node)}[PROLOG_PROGRAM]


# --- options and the parameters file -----------------------------------------------------------------------


def test_observability_is_on_by_default_and_refuses_wrong_types() -> None:
    defaults = parse_options({}).observability
    assert (defaults.enabled, defaults.scrape_interval, defaults.node_exporter, defaults.dcgm_exporter) == (
        True,
        15,
        True,
        True,
    )
    with pytest.raises(OptionsError, match=r"options\.observability\.scrape_interval: got '15s'; expected an integer"):
        parse_options({"observability": {"scrape_interval": "15s"}})


def params_json(metrics: Any) -> dict[str, Any]:
    data = ProvisioningParameters("c", "lifecycle-driven", CLUSTER_GROUPS).to_json()
    data["hyperpod_cdk"]["metrics"] = metrics
    return data


def test_the_metrics_target_round_trips_and_is_optional() -> None:
    with_target = ProvisioningParameters("c", "lifecycle-driven", CLUSTER_GROUPS, metrics=TARGET)
    assert ProvisioningParameters.loads(with_target.dumps()).metrics == TARGET
    assert ProvisioningParameters.from_json(params_json(None)).metrics is None
    assert "metrics" not in ProvisioningParameters("c", "lifecycle-driven", CLUSTER_GROUPS).to_json()["hyperpod_cdk"]


def test_a_bad_metrics_target_names_every_problem_with_its_path() -> None:
    with pytest.raises(ParametersError) as error:
        ProvisioningParameters.from_json(params_json({"remote_write_url": "http://x/api", "region": "", "extra": 1}))
    text = str(error.value)
    assert "hyperpod_cdk.metrics.extra: unknown key" in text
    assert "hyperpod_cdk.metrics.remote_write_url: got 'http://x/api'; expected an https:// URL" in text
    assert "hyperpod_cdk.metrics.region: got ''" in text
    with pytest.raises(ParametersError, match=r"hyperpod_cdk\.metrics: got 'yes'; expected an object"):
        ProvisioningParameters.from_json(params_json("yes"))


def test_the_neuron_bridge_is_bound_to_the_address_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS's bridge takes only --port and would listen on every address; the wrapper binds it (review L4), however
    the script calls prometheus_client."""
    import sys
    import types

    from training_runtime.metrics import neuron_bridge

    calls: list[tuple[Any, ...]] = []

    def start_http_server(port: int, addr: str = "0.0.0.0", **kwargs: Any) -> None:
        calls.append((port, addr, sys.argv[1:]))

    exposition = types.ModuleType("prometheus_client.exposition")
    exposition.start_http_server = start_http_server  # type: ignore[attr-defined]
    client = types.ModuleType("prometheus_client")
    client.exposition = exposition  # type: ignore[attr-defined]
    client.start_http_server = start_http_server  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "prometheus_client", client)
    monkeypatch.setitem(sys.modules, "prometheus_client.exposition", exposition)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    script = tmp_path / "neuron-monitor-prometheus.py"
    script.write_text(
        "import argparse\nfrom prometheus_client import start_http_server\nimport prometheus_client\n"
        "args = argparse.ArgumentParser()\nargs.add_argument('--port', type=int, default=8000)\n"
        "port = args.parse_args().port\nstart_http_server(port)\n"
        "prometheus_client.start_http_server(port, addr='0.0.0.0')\n"
    )
    assert neuron_bridge.main(["--listen", "127.0.0.1", str(script), "--port", "8001"]) == 0
    assert calls == [(8001, "127.0.0.1", ["--port", "8001"])] * 2
    assert neuron_bridge.main(["127.0.0.1", str(script)]) == 2


def test_the_emulations_network_exporters_round_trip_and_are_checked() -> None:
    from training_runtime.emulation import parse_emulation

    opened = Emulation(hardware=True, exporters_on_network=True)
    assert opened.to_json() == {"hardware": True, "exporters_on_network": True}
    assert parse_emulation(opened.to_json(), "e", []) == opened
    assert "exporters_on_network" not in Emulation(hardware=True).to_json()
    problems: list[str] = []
    assert parse_emulation({"exporters_on_network": "yes"}, "e", problems) is None
    assert problems == ["e.exporters_on_network: got 'yes'; expected true or false"]
