"""The instance hardware table and the node_hardware overrides the renderers rely on."""

from __future__ import annotations

import dataclasses

import pytest

from training_runtime.hardware import (
    FIELDS,
    INSTANCE_HARDWARE,
    NodeHardware,
    hardware_for,
    overrides_problems,
)

REQUIRED_TYPES = (
    [f"ml.t3.{size}" for size in ("medium", "large", "xlarge", "2xlarge")]
    + [
        f"ml.m5.{size}"
        for size in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")
    ]
    + [
        f"ml.c5.{size}"
        for size in ("large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge", "18xlarge", "24xlarge")
    ]
    + [
        f"ml.g5.{size}"
        for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")
    ]
    + [
        "ml.p4d.24xlarge",
        "ml.p4de.24xlarge",
        "ml.p5.48xlarge",
        "ml.p5e.48xlarge",
        "ml.p5en.48xlarge",
        "ml.trn1.32xlarge",
        "ml.trn1n.32xlarge",
        "ml.trn2.48xlarge",
    ]
)
GIB = 1024
UNKNOWN = "ml.p6e-gb200.36xlarge"
"""Offered, but no source read describes it (data/instance_hardware.json): not in the table."""


def test_the_table_covers_every_type_hyperpod_training_clusters_use() -> None:
    assert sorted(set(REQUIRED_TYPES) - set(INSTANCE_HARDWARE)) == []
    assert all(name.startswith("ml.") for name in INSTANCE_HARDWARE)


@pytest.mark.parametrize("instance_type", sorted(INSTANCE_HARDWARE))
def test_every_row_is_consistent(instance_type: str) -> None:
    hw = INSTANCE_HARDWARE[instance_type]
    assert hw.problems(instance_type) == []
    assert hw.cpus == hw.sockets * hw.cores_per_socket * hw.threads_per_core
    assert hw.threads_per_core == 1, "rows describe the project's default ThreadsPerCore=1"
    assert 0 < hw.slurm_memory_mib < hw.memory_mib
    assert (hw.gpus > 0) == (hw.gpu_type is not None)
    assert not hw.nvswitch or hw.gpus == 8
    assert (hw.neuron_devices > 0) == (hw.neuron_cores > 0)


@pytest.mark.parametrize(
    ("instance_type", "vcpus", "sockets", "memory_gib", "gpus", "gpu_type", "efa"),
    [
        ("ml.p4d.24xlarge", 96, 2, 1152, 8, "a100", 4),
        ("ml.p4de.24xlarge", 96, 2, 1152, 8, "a100", 4),
        ("ml.p5.48xlarge", 192, 2, 2048, 8, "h100", 32),
        ("ml.p5e.48xlarge", 192, 2, 2048, 8, "h200", 32),
        ("ml.p5en.48xlarge", 192, 2, 2048, 8, "h200", 16),
        ("ml.g5.48xlarge", 192, 2, 768, 8, "a10g", 1),
        ("ml.g5.12xlarge", 48, 1, 192, 4, "a10g", 1),
        ("ml.g5.xlarge", 4, 1, 16, 1, "a10g", 0),
        ("ml.m5.xlarge", 4, 1, 16, 0, None, 0),
        ("ml.c5.18xlarge", 72, 2, 144, 0, None, 0),
        ("ml.t3.medium", 2, 1, 4, 0, None, 0),
    ],
)
def test_known_ec2_figures(
    instance_type: str, vcpus: int, sockets: int, memory_gib: int, gpus: int, gpu_type: str | None, efa: int
) -> None:
    hw = INSTANCE_HARDWARE[instance_type]
    assert hw.with_threads_per_core(2).cpus == vcpus
    assert hw.cpus == vcpus // 2
    assert hw.sockets == sockets
    assert hw.memory_mib == memory_gib * GIB
    assert (hw.gpus, hw.gpu_type, hw.efa_interfaces) == (gpus, gpu_type, efa)


def test_nvswitch_only_on_the_sxm_gpu_types() -> None:
    assert {t for t, hw in INSTANCE_HARDWARE.items() if hw.nvswitch} == {
        "ml.p4d.24xlarge",
        "ml.p4de.24xlarge",
        "ml.p5.48xlarge",
        "ml.p5e.48xlarge",
        "ml.p5en.48xlarge",
    }


@pytest.mark.parametrize(
    ("instance_type", "devices", "cores", "efa", "vcpus", "memory_gib"),
    [
        ("ml.trn1.32xlarge", 16, 32, 8, 128, 512),
        ("ml.trn1n.32xlarge", 16, 32, 16, 128, 512),
        ("ml.trn2.48xlarge", 16, 64, 16, 192, 2048),
    ],
)
def test_trainium_figures(instance_type: str, devices: int, cores: int, efa: int, vcpus: int, memory_gib: int) -> None:
    hw = INSTANCE_HARDWARE[instance_type]
    assert (hw.neuron_devices, hw.neuron_cores, hw.efa_interfaces) == (devices, cores, efa)
    assert hw.with_threads_per_core(2).cpus == vcpus
    assert hw.memory_mib == memory_gib * GIB
    assert hw.gpus == 0


@pytest.mark.parametrize(
    ("memory_mib", "expected"),
    [
        (2000, 1500),  # tiny test node: the 1 GiB floor is capped at a quarter
        (4 * GIB, 3 * GIB),  # 1 GiB floor
        (16 * GIB, 15 * GIB),  # 1 GiB floor still above 5 %
        (64 * GIB, 64 * GIB - 3277),  # 5 % (rounded up)
        (2048 * GIB, 2048 * GIB - 104858),  # 5 %, not capped: page tables alone take ~1.6 % of RAM
    ],
)
def test_slurm_memory_keeps_a_reserve_for_the_os(memory_mib: int, expected: int) -> None:
    assert NodeHardware(1, 1, 1, 1, memory_mib).slurm_memory_mib == expected


def test_slurm_memory_grows_with_memory_and_never_exceeds_95_percent() -> None:
    previous = 0
    for memory in range(512, 300_000, 997):
        slurm = NodeHardware(1, 1, 1, 1, memory).slurm_memory_mib
        assert previous <= slurm <= memory * 0.95 + 1
        assert slurm >= memory * 0.75 - 1
        previous = slurm


def test_with_threads_per_core_doubles_cpus_and_rejects_other_values() -> None:
    p5 = INSTANCE_HARDWARE["ml.p5.48xlarge"]
    smt = p5.with_threads_per_core(2)
    assert (smt.cpus, smt.sockets, smt.cores_per_socket, smt.threads_per_core) == (192, 2, 48, 2)
    assert smt.with_threads_per_core(1) == p5
    with pytest.raises(ValueError, match=r"threads_per_core: got 3; allowed: 1 .* or 2"):
        p5.with_threads_per_core(3)


def test_hardware_for_known_unknown_and_smt() -> None:
    assert hardware_for("ml.p5.48xlarge", {}) is INSTANCE_HARDWARE["ml.p5.48xlarge"]
    assert hardware_for("ml.x9.huge", {}) is None
    assert hardware_for("ml.p5.48xlarge", {}, threads_per_core=2).cpus == 192  # type: ignore[union-attr]


def test_an_override_replaces_only_the_fields_it_names() -> None:
    base = INSTANCE_HARDWARE["ml.g5.12xlarge"]
    hw = hardware_for("ml.g5.12xlarge", {"ml.g5.12xlarge": {"memory_mib": 100_000, "gpu_type": "a10"}})
    assert hw == dataclasses.replace(base, memory_mib=100_000, gpu_type="a10")


def test_an_override_for_another_type_is_ignored() -> None:
    assert hardware_for("ml.m5.large", {"ml.x9.huge": {"nonsense": 1}}) is INSTANCE_HARDWARE["ml.m5.large"]


def test_an_override_defines_a_type_missing_from_the_table() -> None:
    hw = hardware_for(UNKNOWN, {UNKNOWN: {"cpus": 4, "memory_mib": 16384, "gpus": 1, "gpu_type": "l4"}})
    assert hw == NodeHardware(
        cpus=4, sockets=1, cores_per_socket=4, threads_per_core=1, memory_mib=16384, gpus=1, gpu_type="l4"
    )


def test_a_new_type_with_sockets_and_threads_gets_cores_derived() -> None:
    hw = hardware_for("ml.new", {"ml.new": {"cpus": 16, "memory_mib": 8000, "sockets": 2, "threads_per_core": 2}})
    assert hw is not None
    assert (hw.sockets, hw.cores_per_socket, hw.threads_per_core) == (2, 4, 2)


def test_cpus_alone_resets_the_topology_and_topology_alone_derives_cpus() -> None:
    only_cpus = hardware_for("ml.p5.48xlarge", {"ml.p5.48xlarge": {"cpus": 64}})
    assert only_cpus is not None
    assert (only_cpus.cpus, only_cpus.sockets, only_cpus.cores_per_socket, only_cpus.threads_per_core) == (64, 1, 64, 1)
    smt = hardware_for("ml.p5.48xlarge", {"ml.p5.48xlarge": {"threads_per_core": 2}})
    assert smt == INSTANCE_HARDWARE["ml.p5.48xlarge"].with_threads_per_core(2)


def test_override_errors_name_the_field_path_the_value_and_what_is_allowed() -> None:
    with pytest.raises(ValueError) as raised:
        hardware_for(
            "ml.p5.48xlarge",
            {"ml.p5.48xlarge": {"cpu": 8, "gpus": -1, "memory_mib": 0, "sockets": True, "gpu_type": "H100"}},
        )
    message = str(raised.value)
    assert "(5 problems)" in message
    assert "node_hardware.ml.p5.48xlarge.cpu: got 8; unknown field. Allowed: cpus, sockets" in message
    assert "node_hardware.ml.p5.48xlarge.gpus: got -1; allowed: an integer of 0 or more" in message
    assert "node_hardware.ml.p5.48xlarge.memory_mib: got 0; allowed: a positive integer" in message
    assert "node_hardware.ml.p5.48xlarge.sockets: got True; allowed: a positive integer" in message
    assert "node_hardware.ml.p5.48xlarge.gpu_type: got 'H100'; allowed: null or 1-32 lower-case" in message


def test_a_new_type_must_give_cpus_and_memory() -> None:
    with pytest.raises(ValueError, match=r"node_hardware\.ml\.p6e-gb200\.36xlarge: .* must give cpus and memory_mib"):
        hardware_for(UNKNOWN, {UNKNOWN: {"gpus": 1}})


def test_inconsistent_topology_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"\.cpus: got 10; must equal sockets \* cores_per_socket .* = 96"):
        hardware_for("ml.p5.48xlarge", {"ml.p5.48xlarge": {"cpus": 10, "sockets": 2}})


def test_an_entry_that_is_not_a_mapping_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"node_hardware\.ml\.p5\.48xlarge: got 96; expected a mapping"):
        hardware_for("ml.p5.48xlarge", {"ml.p5.48xlarge": 96})  # type: ignore[dict-item]


def test_overrides_problems_reports_every_type_at_once() -> None:
    problems = overrides_problems(
        {"ml.a": {"cpus": 2}, "ml.b": 3, "ml.p5.48xlarge": {"efa_interfaces": -2}, "ml.m5.large": {"cpus": 2}},
        path="options.node_hardware",
    )
    assert problems == [
        "options.node_hardware.ml.a: ml.a is not in the hardware table, so its entry must give memory_mib",
        "options.node_hardware.ml.b: got 3; expected a mapping of field names to values",
        "options.node_hardware.ml.p5.48xlarge.efa_interfaces: got -2; allowed: an integer of 0 or more",
    ]
    assert overrides_problems([1, 2]) == ["node_hardware: got [1, 2]; expected a mapping of instance type to figures"]


def test_fields_are_the_dataclass_fields() -> None:
    assert FIELDS == (
        "cpus",
        "sockets",
        "cores_per_socket",
        "threads_per_core",
        "memory_mib",
        "gpus",
        "gpu_type",
        "nvswitch",
        "neuron_devices",
        "neuron_cores",
        "efa_interfaces",
    )
