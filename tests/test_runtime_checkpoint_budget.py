"""The memory budget of asynchronous checkpoints (training_runtime.checkpoint.budget): half a node's memory less the
OS reserve, for every rank's staging buffer together; the numbers in the refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from training_runtime.checkpoint.budget import (
    GIB,
    MIB,
    STAGING_SHARE_PERCENT,
    StagingBudget,
    StagingBudgetError,
    check_node,
    meminfo_total_bytes,
    staging_fits,
)

NODE = 16 * GIB
"""16 GiB: the OS reserve is 1 GiB (5 % is less than the 1 GiB floor), 15 GiB usable, a budget of 7.5 GiB."""
LIMIT = 7680 * MIB


def test_the_budget_is_half_the_memory_less_the_os_reserve() -> None:
    budget = StagingBudget(NODE)
    assert STAGING_SHARE_PERCENT == 50
    assert (budget.usable_bytes, budget.limit_bytes) == (15 * GIB, LIMIT)
    # A large node: the reserve is 5 % (1152 GiB -> 57.6 GiB rounded up to the MiB), half of the rest.
    large = StagingBudget(1152 * GIB)
    assert large.limit_bytes == (1152 * 1024 - 58983) * MIB // 2


def test_a_buffer_at_the_limit_fits_and_one_byte_more_does_not() -> None:
    assert staging_fits(LIMIT, NODE)
    assert not staging_fits(LIMIT + 1, NODE)
    assert staging_fits(2 * LIMIT, NODE, share_percent=100)


def test_every_rank_of_the_node_counts() -> None:
    check_node(2 * GIB, 3, NODE)  # 6 GiB: fits
    with pytest.raises(StagingBudgetError) as refused:
        check_node(2 * GIB, 4, NODE)  # 8 GiB: does not
    message = str(refused.value)
    assert "stage 8.0 GiB per node (2.0 GiB of state per rank x 4 ranks)" in message
    assert "over the staging budget of 7.5 GiB (50% of 16.0 GiB less the OS reserve of 1.0 GiB)" in message
    assert "Fix: shard the state over more nodes (FSDP)" in message and "--sync-checkpoints" in message


def test_memtotal_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemFree:         1000 kB\nMemTotal:       24567892 kB\nMemAvailable:   9 kB\n")
    assert meminfo_total_bytes(str(meminfo)) == 24567892 * 1024
    meminfo.write_text("MemFree: 1000 kB\n")
    with pytest.raises(ValueError, match="no MemTotal"):
        meminfo_total_bytes(str(meminfo))
