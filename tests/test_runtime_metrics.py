"""The metrics package: the Slurm collector's parsing and metrics, the textfile writing, the EFA counters,
the GPU-to-job mapping of the prolog and epilog, the catalog. Stdlib and pytest only (runs on 3.8)."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest

from training_runtime.metrics import catalog, collect, gpu_jobs, slurm
from training_runtime.metrics.efa import efa_families
from training_runtime.metrics.exposition import Family, render, write_textfile

W = slurm.WIDTH


def sinfo_line(*fields: str) -> str:
    """A row as ``sinfo -O field:WIDTH|`` prints it: every field padded to the width, then the suffix."""
    return "".join(f.ljust(W) + "|" for f in fields)


SINFO = "\n".join(
    [
        sinfo_line("w1", "idle*", "0/16/0/16", "gpu:a100:8(S:0-1)", "gpu:a100:0(IDX:N/A)", "none"),
        sinfo_line("w2", "drain", "4/8/4/16", "gpu:8", "gpu:2(IDX:0-1)", "bad | gpu 3"),
        sinfo_line("w2", "drain", "4/8/4/16", "gpu:8", "gpu:2(IDX:0-1)", "bad | gpu 3"),  # second partition
        sinfo_line("w3", "mix", "8/8/0/16", "(null)", "(null)", "none"),
    ]
)
SQUEUE = "12|RUNNING|cpu|alice|w[1-2]\n13|PENDING|cpu,gpu|bob|(Resources)\n14|RUNNING|gpu|bob|w3\n"
SDIAG = """*******************************************************
Main schedule statistics (microseconds):
\tLast cycle:   80
\tMean cycle:   123
\tLast queue length: 7
Backfilling stats
\tMean cycle: 999
\tLast queue length: 55
"""


def test_sinfo_rows_one_per_node_with_flags_stripped_and_reason_kept_whole() -> None:
    rows = {r.name: r for r in slurm.parse_sinfo(SINFO)}
    assert sorted(rows) == ["w1", "w2", "w3"]
    assert (rows["w1"].state, rows["w1"].reason) == ("idle", "")
    assert (rows["w2"].state, rows["w2"].reason, rows["w2"].cpus) == ("drain", "bad | gpu 3", (4, 8, 4, 16))
    assert (rows["w1"].gpus_total, rows["w1"].gpus_used, rows["w2"].gpus_used, rows["w3"].gpus_total) == (8, 0, 2, 0)


def test_gpu_counts_add_up_typed_and_untyped_gres() -> None:
    assert slurm.gpu_count("gpu:a100:4(IDX:0-3),gpu:h100:2,shard:8") == 6


def test_squeue_jobs_running_have_nodes_pending_have_none() -> None:
    jobs = {j.job_id: j for j in slurm.parse_squeue(SQUEUE)}
    assert jobs["12"].nodes == ("w1", "w2") and jobs["13"].nodes == ()
    multi = slurm.parse_squeue("15|RUNNING|gpu|eve|a[1-2,05],b-[1-2]x1,c\n")
    assert multi[0].nodes == ("a1", "a2", "a05", "b-1x1", "b-2x1", "c")


def test_sdiag_reads_the_main_schedulers_figures_not_backfillings() -> None:
    assert slurm.parse_sdiag(SDIAG) == {slurm.SCHEDULER_CYCLE: 123.0, slurm.SCHEDULER_QUEUE: 7.0}


def fake_run(outputs: dict[str, str]):  # type: ignore[no-untyped-def]
    def run(argv: Sequence[str]) -> str:
        if argv[0] not in outputs:
            raise RuntimeError(argv[0] + " failed")
        return outputs[argv[0]]

    return run


def samples(families: list[Family]) -> dict[str, dict[tuple, float]]:
    return {f.name: f.samples for f in families}


def labels(**kwargs: str) -> tuple:
    return tuple(sorted(kwargs.items()))


def test_slurm_metrics_have_the_contract_names_and_values() -> None:
    got = samples(slurm.slurm_families(fake_run({"sinfo": SINFO, "squeue": SQUEUE, "sdiag": SDIAG})))
    assert set(got) == set(catalog.METRICS["slurm"])
    assert got[slurm.NODES] == {labels(state="idle"): 1, labels(state="drain"): 1, labels(state="mix"): 1}
    assert got[slurm.NODE_STATE][labels(node="w2", state="drain", reason="bad | gpu 3")] == 1
    assert got[slurm.JOBS] == {
        labels(state="RUNNING", partition="cpu"): 1,
        labels(state="PENDING", partition="cpu,gpu"): 1,
        labels(state="RUNNING", partition="gpu"): 1,
    }
    assert set(got[slurm.JOB_NODES]) == {
        labels(job_id="12", user="alice", partition="cpu", node="w1"),
        labels(job_id="12", user="alice", partition="cpu", node="w2"),
        labels(job_id="14", user="bob", partition="gpu", node="w3"),
    }
    assert got[slurm.CPUS] == {
        labels(state=s): v for s, v in (("alloc", 12), ("idle", 32), ("other", 4), ("total", 48))
    }
    assert got[slurm.GPUS] == {labels(state="alloc"): 2, labels(state="idle"): 14, labels(state="total"): 16}
    assert got[slurm.SCHEDULER_CYCLE] == {(): 123} and got[slurm.SCHEDULER_QUEUE] == {(): 7}
    assert got[slurm.SUCCESS] == {(): 1}


def test_a_failed_command_marks_the_collection_failed_and_keeps_the_rest() -> None:
    got = samples(slurm.slurm_families(fake_run({"sinfo": SINFO, "squeue": SQUEUE})))
    assert got[slurm.SUCCESS] == {(): 0} and got[slurm.NODES] and not got[slurm.SCHEDULER_CYCLE]


def test_label_values_are_escaped() -> None:
    family = Family("m", "help")
    family.set(1, reason='say "hi"\\\nnow')
    assert 'm{reason="say \\"hi\\"\\\\\\nnow"} 1' in render([family])


def test_textfiles_are_replaced_whole_and_world_readable(tmp_path: Path) -> None:
    write_textfile(str(tmp_path), "x.prom", "a 1\n")
    write_textfile(str(tmp_path), "x.prom", "a 2\n")
    assert os.listdir(str(tmp_path)) == ["x.prom"] and (tmp_path / "x.prom").read_text() == "a 2\n"
    assert stat.S_IMODE((tmp_path / "x.prom").stat().st_mode) == 0o644


def test_the_collector_runs_slurm_commands_from_the_given_directory(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("sinfo", SINFO), ("squeue", SQUEUE), ("sdiag", SDIAG)):
        (tmp_path / name).write_text(text)
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\ncat {tmp_path / name}\n")
        script.chmod(0o755)
    out = tmp_path / "textfiles"
    assert collect.main(["--slurm", "--dir", str(out), "--slurm-bin", str(bin_dir)]) == 0
    text = (out / "slurm.prom").read_text()
    assert 'slurm_node_state{node="w2",reason="bad | gpu 3",state="drain"} 1' in text
    assert "slurm_collector_success 1" in text


def test_efa_counters_from_sysfs(tmp_path: Path) -> None:
    counters = tmp_path / "sys/class/infiniband/rdmap0s31/ports/1/hw_counters"
    counters.mkdir(parents=True)
    (counters / "rx_bytes").write_text("1024\n")
    (counters / "tx_bytes").write_text("2048\n")
    got = samples(efa_families(tmp_path))
    assert set(got) == set(catalog.METRICS["efa"])
    assert got["efa_rx_bytes_total"] == {labels(device="rdmap0s31", port="1"): 1024}
    assert got["efa_tx_bytes_total"] == {labels(device="rdmap0s31", port="1"): 2048}
    assert got["efa_rdma_read_bytes_total"] == {}


def env(job: str, gpus: str = "", cuda: str = "") -> dict[str, str]:
    found = {"SLURM_JOB_ID": job}
    if gpus:
        found["SLURM_JOB_GPUS"] = gpus
    if cuda:
        found["CUDA_VISIBLE_DEVICES"] = cuda
    return found


def test_prolog_and_epilog_keep_one_file_per_gpu_listing_its_jobs(tmp_path: Path) -> None:
    directory = str(tmp_path / "map")
    assert gpu_jobs.main(["--prolog", "--dir", directory], env("7", gpus="0,1")) == 0
    assert gpu_jobs.main(["--prolog", "--dir", directory], env("8", cuda="1")) == 0
    assert gpu_jobs.main(["--prolog", "--dir", directory], env("8", cuda="1")) == 0  # a second prolog run
    assert (tmp_path / "map/0").read_text() == "7\n" and (tmp_path / "map/1").read_text() == "7\n8\n"
    gpu_jobs.main(["--epilog", "--dir", directory], env("7", gpus="0,1"))
    assert not (tmp_path / "map/0").exists() and (tmp_path / "map/1").read_text() == "8\n"


def test_the_mapping_never_fails_a_job(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert gpu_jobs.main(["--prolog", "--dir", str(blocker / "map")], env("7", gpus="0")) == 0
    assert gpu_jobs.main(["--prolog", "--dir", str(tmp_path / "m")], env("7")) == 0
    assert not (tmp_path / "m").exists()  # a job without GPUs writes nothing


def test_the_dcgm_counters_csv_is_the_catalogs_dcgm_list() -> None:
    rows = [line.split(", ") for line in catalog.dcgm_counters_csv().splitlines() if not line.startswith("#")]
    assert [r[0] for r in rows] == list(catalog.METRICS["dcgm"])
    assert {r[1] for r in rows} <= {"gauge", "counter"}


@pytest.mark.parametrize("exporter", ["node", "slurm", "dcgm", "neuron", "efa", "scaler", "cost"])
def test_the_catalog_is_keyed_by_exporter_and_all_metrics_is_their_union(exporter: str) -> None:
    assert catalog.METRICS[exporter] and set(catalog.METRICS[exporter]) <= catalog.ALL_METRICS
