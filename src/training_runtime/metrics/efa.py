"""EFA metrics: the hardware counters the EFA driver exposes in sysfs
(``/sys/class/infiniband/<device>/ports/<port>/hw_counters/<counter>``), as ``efa_<counter>_total``.

node_exporter's infiniband collector reads the ``counters`` directory, which EFA devices do not have, so
the metrics collector (:mod:`.collect`) writes these to node_exporter's textfile directory instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

from training_runtime.metrics.exposition import Family

SYSFS = "/sys/class/infiniband"
COUNTERS = (
    "tx_bytes",
    "rx_bytes",
    "tx_pkts",
    "rx_pkts",
    "rx_drops",
    "rdma_read_bytes",
    "rdma_write_bytes",
    "rdma_read_resp_bytes",
    "rdma_write_recv_bytes",
    "retrans_pkts",
)
"""The counters exported (those a device lacks are skipped)."""
METRIC_NAMES = tuple("efa_{}_total".format(c) for c in COUNTERS)


def efa_families(root: Path = Path("/")) -> List[Family]:
    """One family per counter, one sample per port of every RDMA device with ``hw_counters`` (on EC2 that
    is the EFA devices, ``rdmap*``)."""
    families: Dict[str, Family] = {
        c: Family("efa_{}_total".format(c), "EFA hardware counter {} (sysfs hw_counters)".format(c), "counter")
        for c in COUNTERS
    }
    base = root / SYSFS.lstrip("/")
    for counters in sorted(base.glob("*/ports/*/hw_counters")):
        device, port = counters.parent.parent.parent.name, counters.parent.name
        for counter, family in families.items():
            try:
                text = (counters / counter).read_text().strip()
            except OSError:
                continue
            if text.isdigit():
                family.set(int(text), device=device, port=port)
    return [families[c] for c in COUNTERS]
