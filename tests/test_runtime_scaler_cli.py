"""``python3 -m training_runtime scaler once|status``: the entry point end to end against the fakes (IMDS role
credentials, the SageMaker JSON-protocol fake, Slurm commands as tiny scripts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clock import utc
from scaler_fakes import FakeImds, FakeSageMaker
from training_runtime.__main__ import main
from training_runtime.scaler.heartbeat import TAG_KEY, parse_heartbeat


def write_config(tmp_path: Path, endpoint: str, imds_url: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("scontrol", "squeue"):
        script = bin_dir / name
        script.write_text("#!/bin/sh\nexit 0\n")
        script.chmod(0o755)
    config = {
        "cluster_name": "demo",
        "cluster_arn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abcdefghijkl",
        "region": "us-west-2",
        "endpoint": endpoint,
        "naming": "ip",
        "groups": [{"name": "gpu", "partition": "gpu", "min": 0, "max": 4, "idle_minutes": 10}],
        "imds_url": imds_url,
        "state_path": str(tmp_path / "state.json"),
        "heartbeat_path": str(tmp_path / "heartbeat"),
        "metrics_dir": str(tmp_path / "metrics"),
        "slurm_bin": str(bin_dir),
        "resource_config": str(tmp_path / "absent.json"),
    }
    path = tmp_path / "scaler.json"
    path.write_text(json.dumps(config))
    return path


@pytest.mark.calendar
def test_once_runs_a_cycle_with_role_credentials_and_status_reads_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeSageMaker()
    fake.groups["gpu"] = [1, 1]
    # role credentials good for six hours from the run's clock, which the CLI's credential cache reads: fetched once
    imds = FakeImds(utc(-6 * 3600).strftime("%Y-%m-%dT%H:%M:%SZ"))
    try:
        config = write_config(tmp_path, fake.url, imds.url)
        assert main(["scaler", "once", "--config", str(config)]) == 0
        out = capsys.readouterr().out.strip().splitlines()[-1]
        beat = parse_heartbeat(out)
        assert beat.status == "ok" and [(g.name, g.target) for g in beat.groups] == [("gpu", 1)]
        assert fake.tags[TAG_KEY] == out
        assert "Credential=ASIA1/" in fake.requests[0][2]["Authorization"]
        assert imds.fetches == 1 and len(fake.requests) > 1
        assert main(["scaler", "status", "--config", str(config)]) == 0
        assert "heartbeat: " + out in capsys.readouterr().out
    finally:
        fake.close()
        imds.server.shutdown()
        imds.server.server_close()


def test_a_broken_config_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "scaler.json"
    path.write_text("{}")
    assert main(["scaler", "status", "--config", str(path)]) == 2
    assert "cluster_name" in capsys.readouterr().err
