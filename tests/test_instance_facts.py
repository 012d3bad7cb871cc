"""The instance-type hardware facts (data/instance_hardware.json): every offered type has a sourced, dated entry, the
generated module and doc are current, the figures are EC2's answer (moto's snapshot of DescribeInstanceTypes), the
refresh script writes what EC2 answers, and the runtime's slurm.conf table derives from them."""

from __future__ import annotations

import datetime
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto.ec2.models.instance_types import INSTANCE_TYPES
from moto.server import ThreadedMotoServer

from hyperpod_cdk.aws_data import instance_catalog
from test_docs import _script
from training_runtime.hardware import INSTANCE_HARDWARE, gres_type
from training_runtime.instance_facts import INSTANCE_FACTS, facts_for

UNKNOWN = "ml.p6e-gb200.36xlarge"


def _generator() -> Any:
    return _script("gen_instance_facts")


def _refresh() -> Any:
    return _script("refresh_instance_facts")


def test_the_generated_module_and_doc_are_current() -> None:
    for path, text in _generator().outputs().items():
        assert path.read_text() == text, f"{path.name} is stale: run scripts/gen_instance_facts.py"


def test_every_offered_type_has_a_sourced_dated_entry() -> None:
    generator = _generator()
    assert generator.problems(generator.load()) == []
    assert set(INSTANCE_FACTS) == set(instance_catalog.known_types())
    assert all(f.source and f.checked for f in INSTANCE_FACTS.values())


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"source": ""}, "no source"),
        ({"checked": "yesterday"}, "is not a date"),
        ({"vcpus": None}, "does not start with 'unknown'"),
        ({"vcpus": 7}, "vcpus 7 != cores 96 * threads per core 2"),
        ({"threads_per_core": 2, "valid_threads_per_core": [1]}, "is not among [1]"),
        ({"accelerator": {"kind": "tpu"}}, "accelerator kind 'tpu'"),
    ],
)
def test_a_bad_entry_is_refused_with_what_is_wrong(change: dict[str, Any], problem: str) -> None:
    generator = _generator()
    document = generator.load()
    document["types"]["ml.p5.48xlarge"].update(change)
    assert any(problem in p and p.startswith("ml.p5.48xlarge") for p in generator.problems(document))


def test_a_missing_offered_type_is_refused() -> None:
    generator = _generator()
    document = generator.load()
    del document["types"]["ml.c5.large"]
    assert "ml.c5.large: HyperPod offers it, but it has no entry" in generator.problems(document)


def test_the_figures_are_ec2s_answer_and_an_unknown_type_is_unknown() -> None:
    """Every entry sourced from moto's snapshot equals what the refresh script makes of that snapshot's answer; the
    type no source describes has every figure null, and says why in its source."""
    refresh = _refresh()
    document = _generator().load()
    for name, entry in document["types"].items():
        if entry["source"].startswith("unknown"):
            assert all(entry[f] is None for f in refresh.FIELDS), name
            continue
        assert "DescribeInstanceTypes" in entry["source"]
        assert {f: entry[f] for f in refresh.FIELDS} == refresh.facts_of(INSTANCE_TYPES[name[3:]]), name
    assert document["types"][UNKNOWN]["source"].startswith("unknown: ")
    assert UNKNOWN not in INSTANCE_HARDWARE and facts_for(UNKNOWN) is not None and not facts_for(UNKNOWN).known


def test_facts_are_what_ec2_says_not_what_a_name_suggests() -> None:
    """Threads per core: Graviton and the x86 types without SMT (m8a, c8a, g7) take only 1; g5 only 2."""
    assert facts_for("ml.c7g.xlarge").valid_threads_per_core == (1,)  # type: ignore[union-attr]
    assert facts_for("ml.m8a.16xlarge").valid_threads_per_core == (1,)  # type: ignore[union-attr]
    assert facts_for("ml.g7.2xlarge").valid_threads_per_core == (1,)  # type: ignore[union-attr]
    assert facts_for("ml.g5.xlarge").valid_threads_per_core == (2,)  # type: ignore[union-attr]
    p5 = facts_for("ml.p5.48xlarge")
    assert p5 is not None
    assert (p5.accelerator_kind, p5.accelerators, p5.accelerator_model, p5.efa_interfaces) == (
        "nvidia-gpu",
        8,
        "H100",
        32,
    )
    assert (p5.instance_store_disks, p5.instance_store_disk_gb, p5.instance_store_nvme, p5.architecture) == (
        8,
        3800,
        True,
        "x86_64",
    )
    assert facts_for("ml.trn2.48xlarge").accelerator_kind == "neuron"  # type: ignore[union-attr]
    assert facts_for("ml.c8g.large").architecture == "arm64"  # type: ignore[union-attr]
    assert {t for t, f in INSTANCE_FACTS.items() if f.gpudirect_storage} == {
        "ml.p5.48xlarge",
        "ml.p5e.48xlarge",
        "ml.p5en.48xlarge",
        "ml.p6-b200.48xlarge",
    }


def test_the_slurm_table_derives_from_the_facts() -> None:
    for name, hardware in INSTANCE_HARDWARE.items():
        facts = INSTANCE_FACTS[name]
        assert (hardware.cpus, hardware.threads_per_core, hardware.memory_mib) == (facts.cores, 1, facts.memory_mib)
        assert hardware.efa_interfaces == facts.efa_interfaces
        assert hardware.gpus == (facts.accelerators if facts.accelerator_kind == "nvidia-gpu" else 0)
        assert hardware.neuron_devices == (facts.accelerators if facts.accelerator_kind == "neuron" else 0)
    assert INSTANCE_HARDWARE["ml.g7.2xlarge"].cpus == 8  # one thread per core: every vCPU is a core
    assert INSTANCE_HARDWARE["ml.trn1.32xlarge"].neuron_cores == 32  # EC2: 16 devices x 2 cores
    assert INSTANCE_HARDWARE["ml.trn2.48xlarge"].neuron_cores == 64  # layout: LNC=2 halves EC2's 128
    assert gres_type("RTX PRO Server 6000") == "rtx-pro-server-6000"
    assert INSTANCE_HARDWARE["ml.p6-b200.48xlarge"].gpu_type == "b200"


@pytest.fixture
def ec2_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def test_refresh_writes_the_fields_from_ec2s_answer(
    ec2_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against a moto server on 127.0.0.1 whose answer for p5.48xlarge and c7g.large is changed: the data file gets
    the changed figures, today's date and 'DescribeInstanceTypes <region>'; the type EC2 does not describe keeps its
    entry; the hand-kept sections stay."""
    refresh = _refresh()
    output = tmp_path / "instance_hardware.json"
    shutil.copy(refresh.FACTS, output)
    p5 = INSTANCE_TYPES["p5.48xlarge"]
    monkeypatch.setitem(p5["NetworkInfo"]["EfaInfo"], "MaximumEfaInterfaces", 31)
    monkeypatch.setitem(p5["GpuInfo"]["Gpus"][0], "Name", "H100X")
    monkeypatch.setitem(INSTANCE_TYPES["c7g.large"]["VCpuInfo"], "ValidThreadsPerCore", [1, 2])
    monkeypatch.setitem(INSTANCE_TYPES["c7g.large"]["MemoryInfo"], "SizeInMiB", 4097)
    day = datetime.date(2031, 2, 28)  # the script's injected clock: whatever the date, entries carry the clock's
    argv = ["--region", "eu-west-1", "--endpoint-url", ec2_url, "--output", str(output)]
    assert refresh.main(argv, today=lambda: day) == 0
    written = json.loads(output.read_text())
    entry = written["types"]["ml.p5.48xlarge"]
    assert (entry["source"], entry["checked"]) == ("DescribeInstanceTypes eu-west-1", "2031-02-28")
    assert entry["efa"] == {"supported": True, "max_interfaces": 31}
    assert entry["accelerator"]["model"] == "H100X"
    c7g = written["types"]["ml.c7g.large"]
    assert (c7g["valid_threads_per_core"], c7g["memory_mib"]) == ([1, 2], 4097)
    before = json.loads(refresh.FACTS.read_text())
    assert written["types"][UNKNOWN] == before["types"][UNKNOWN]
    assert (written["layout"], written["gpudirect_storage"]) == (before["layout"], before["gpudirect_storage"])
    assert set(written["types"]) == set(before["types"])


def test_the_region_lists_are_what_their_generator_reads_from_cfn_lint_and_botocore() -> None:
    """data/instance_types_by_region.json is scripts/gen_instance_regions.py's output (its Regions and types; the
    tools' versions in its source lines may be older than the installed ones)."""
    wanted = _script("gen_instance_regions").document()
    committed = json.loads(
        (Path(instance_catalog.__file__).parent.parent / "data/instance_types_by_region.json").read_text()
    )
    assert {k: committed[k] for k in ("regions", "api_only")} == {k: wanted[k] for k in ("regions", "api_only")}, (
        "run scripts/gen_instance_regions.py"
    )


def test_every_region_of_the_landing_page_has_a_price_list() -> None:
    """AWS's landing page and its price list (the Region lists) agree on every listed Region; the price list's
    extra Regions are the ones GRP-REGION-UNLISTED warns about."""
    from training_runtime.hyperpod_facts import HYPERPOD_REGIONS

    assert [r for r in HYPERPOD_REGIONS if instance_catalog.types_in(r) is None] == []
    extra = sorted(set(instance_catalog.regions()) - set(HYPERPOD_REGIONS))
    assert extra == ["ap-northeast-2", "ap-south-2", "ap-southeast-5", "ca-central-1", "eu-central-2"]
