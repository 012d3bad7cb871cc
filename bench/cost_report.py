"""`hyperpod-cdk cost`'s computation over 100,000 accounting records: parsing `sacct -P` output, the partitions and
the budgets, and the report by each grouping (training_runtime.cost_report, what the command and the metrics
collector run). Target (issue #32): under 2 s for 100,000 records.

Run in the repo root: ``.venv/bin/python bench/cost_report.py [--records N] [--runs R]``. The records are generated
(seeded): 8 partitions of 16 nodes, 40 accounts, 400 users, jobs of 1-16 nodes and 1-720 minutes over 30 days,
some still running, some never started.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from training_runtime.billing import billing_minutes, node_billing_per_minute
from training_runtime.billing_weights import cpu_weight, weights_text
from training_runtime.cost_report import cost_report, parse_budgets, parse_partitions, parse_sacct

SINCE = datetime(2026, 11, 1)  # a synthetic month of accounting: the report reads no clock but this window
UNTIL = datetime(2026, 12, 1)


def accounting(records: int, seed: int = 32) -> tuple[str, str, str]:
    rng = random.Random(seed)
    partitions = "\n".join(
        f"PartitionName=p{i} TotalCPUs=3072 TotalNodes=16 TRESBillingWeights={weights_text(cpu_weight(97.92 + i, 192))}"
        for i in range(8)
    )
    node = round(node_billing_per_minute(97.92))  # a 192-CPU node at 97.92 per hour
    lines = []
    for job in range(records):
        start = SINCE + timedelta(minutes=rng.randrange(0, 30 * 24 * 60))
        minutes = rng.randrange(1, 721)
        nodes = rng.randrange(1, 17)
        state = rng.choice(("COMPLETED", "COMPLETED", "FAILED", "RUNNING", "PENDING"))
        end = "Unknown" if state in ("RUNNING", "PENDING") else (start + timedelta(minutes=minutes)).isoformat()
        begin = "Unknown" if state == "PENDING" else start.isoformat()
        account = rng.randrange(40)
        lines.append(
            f"{1000 + job}|u{account * 10 + rng.randrange(10)}|a{account}|p{rng.randrange(8)}|{begin}|{end}|"
            f"{minutes * 60}|cpu={192 * nodes},mem={2000 * nodes}G,node={nodes},billing={node * nodes}|{nodes}|{state}"
        )
    sshare = "\n".join(
        f" a{i}||billing={billing_minutes(10**6)}|cpu=1,billing={billing_minutes(i * 1000)}" for i in range(40)
    )
    return "\n".join(lines), partitions, sshare


def once(text: tuple[str, str, str]) -> float:
    started = time.perf_counter()
    jobs, partitions, budgets = parse_sacct(text[0]), parse_partitions(text[1]), parse_budgets(text[2])
    for by in ("account", "user", "partition", "job"):
        cost_report(jobs, partitions, budgets, SINCE, UNTIL, by)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    text = accounting(args.records)
    single = []
    for _ in range(args.runs):
        started = time.perf_counter()
        jobs = parse_sacct(text[0])
        cost_report(jobs, parse_partitions(text[1]), parse_budgets(text[2]), SINCE, UNTIL, "account")
        single.append(time.perf_counter() - started)
    every = [once(text) for _ in range(args.runs)]
    print(f"records: {args.records}, runs: {args.runs}, Python {sys.version.split()[0]}")
    print(f"parse + report by account: median {statistics.median(single):.3f} s, max {max(single):.3f} s")
    print(f"parse + all four groupings: median {statistics.median(every):.3f} s, max {max(every):.3f} s")
    print("target: under 2 s for parse + one report")


if __name__ == "__main__":
    main()
