#!/usr/bin/env python3
"""Rewrite the instance-type hardware facts (``src/hyperpod_cdk/data/instance_hardware.json``) from EC2's own answer.

Asks EC2's ``DescribeInstanceTypes`` (boto3; the usual credentials, ``--profile`` and ``--region``) about every type
HyperPod offers (``data/instance_types_by_region.json``: every Region's list plus the API-only types; ``ml.X`` is EC2's
``X``) and writes, for each type EC2 answers for, its figures with today's date and the source
``DescribeInstanceTypes <region>``. A type EC2 does not describe keeps its entry (an unknown stays unknown, never
guessed), so a Region that lacks a type cannot erase what another Region said. Then regenerate the runtime module and
the doc::

    .venv/bin/python scripts/refresh_instance_facts.py --region us-east-1 [--profile NAME]
    .venv/bin/python scripts/gen_instance_facts.py

``--endpoint-url`` points it at another EC2 endpoint (tests use a moto server on 127.0.0.1); ``--source`` replaces the
source text (the committed seed came from moto's snapshot of the API's answers, and says so).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_instance_facts import FIELDS  # noqa: E402  (what each entry holds; one definition, the generator's)

DATA = ROOT / "src" / "hyperpod_cdk" / "data"
FACTS = DATA / "instance_hardware.json"
OFFERED = DATA / "instance_types_by_region.json"
PREFIX = "ml."
BATCH = 100
"""DescribeInstanceTypes takes at most 100 types per call."""


def offered_types(path: Path = OFFERED) -> list[str]:
    """Every type HyperPod offers in some Region, or that its API accepts, sorted."""
    document = json.loads(path.read_text())
    return sorted({t for types in document["regions"].values() for t in types} | set(document["api_only"]))


def _architecture(answer: dict[str, Any]) -> str | None:
    found = answer.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    for name in ("arm64", "x86_64"):
        if name in found:
            return name
    return None


def _accelerator(answer: dict[str, Any]) -> dict[str, Any]:
    """The accelerators: NVIDIA GPUs (GpuInfo) or AWS Neuron devices (NeuronInfo), else none."""
    gpus = answer.get("GpuInfo", {}).get("Gpus", [])
    if gpus:
        gpu = gpus[0]
        kind = "nvidia-gpu" if gpu.get("Manufacturer") == "NVIDIA" else "other-gpu"
        return {
            "kind": kind,
            "count": sum(g.get("Count", 0) for g in gpus),
            "model": gpu.get("Name"),
            "memory_mib": gpu.get("MemoryInfo", {}).get("SizeInMiB"),
            "cores_per_device": None,
        }
    devices = answer.get("NeuronInfo", {}).get("NeuronDevices", [])
    if devices:
        device = devices[0]
        return {
            "kind": "neuron",
            "count": sum(d.get("Count", 0) for d in devices),
            "model": device.get("Name"),
            "memory_mib": device.get("MemoryInfo", {}).get("SizeInMiB"),
            "cores_per_device": device.get("CoreInfo", {}).get("Count"),
        }
    return {"kind": "none", "count": 0, "model": None, "memory_mib": 0, "cores_per_device": None}


def _instance_store(answer: dict[str, Any]) -> dict[str, Any]:
    info = answer.get("InstanceStorageInfo")
    if not answer.get("InstanceStorageSupported") or not info:
        return {"count": 0, "size_gb": 0, "nvme": False}
    disks = info.get("Disks", [])
    return {
        "count": sum(d.get("Count", 0) for d in disks),
        "size_gb": disks[0].get("SizeInGB") if disks else 0,
        "nvme": info.get("NvmeSupport") in ("required", "supported"),
    }


def facts_of(answer: dict[str, Any]) -> dict[str, Any]:
    """One type's entry from its DescribeInstanceTypes item (an ``InstanceTypeInfo``), without source or date."""
    cpu = answer.get("VCpuInfo", {})
    network = answer.get("NetworkInfo", {})
    efa = bool(network.get("EfaSupported"))
    return {
        "vcpus": cpu.get("DefaultVCpus"),
        "cores": cpu.get("DefaultCores"),
        "threads_per_core": cpu.get("DefaultThreadsPerCore"),
        "valid_threads_per_core": cpu.get("ValidThreadsPerCore") or [cpu.get("DefaultThreadsPerCore")],
        "memory_mib": answer.get("MemoryInfo", {}).get("SizeInMiB"),
        "architecture": _architecture(answer),
        "accelerator": _accelerator(answer),
        "efa": {
            "supported": efa,
            "max_interfaces": network.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0) if efa else 0,
        },
        "instance_store": _instance_store(answer),
    }


def _batches(items: list[str], size: int = BATCH) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def describe(client: Any, ec2_types: Iterable[str]) -> dict[str, dict[str, Any]]:
    """EC2's answer for each type it knows, by EC2 name. A batch that names a type EC2 does not know fails as a
    whole (InvalidInstanceType), so its types are then asked one by one and the unknown ones skipped."""
    from botocore.exceptions import ClientError

    answers: dict[str, dict[str, Any]] = {}
    for batch in _batches(sorted(ec2_types)):
        try:
            found = client.describe_instance_types(InstanceTypes=batch)["InstanceTypes"]
        except ClientError:
            found = []
            for one in batch:
                try:
                    found += client.describe_instance_types(InstanceTypes=[one])["InstanceTypes"]
                except ClientError as error:
                    print(f"EC2 does not describe {one}: {error.response['Error'].get('Code')}", file=sys.stderr)
        answers.update({item["InstanceType"]: item for item in found})
    return answers


def refreshed(document: dict[str, Any], answers: dict[str, dict[str, Any]], source: str, today: str) -> dict[str, Any]:
    """``document`` with the entry of every offered type EC2 answered for replaced, and an unknown entry (every field
    null) for an offered type that has none yet."""
    entries = dict(document.get("types", {}))
    for name in offered_types():
        answer = answers.get(name[len(PREFIX) :])
        if answer is not None:
            entries[name] = {"source": source, "checked": today, **facts_of(answer)}
        elif name not in entries:
            entries[name] = {
                "source": f"unknown: {source} did not describe it",
                "checked": today,
                **dict.fromkeys(FIELDS),
            }
    return {**document, "types": dict(sorted(entries.items()))}


def dump(document: dict[str, Any]) -> str:
    """The data file's text: one line per type, so a refresh shows as one changed line per changed type."""
    lines = ["{"]
    keys = list(document)
    for position, key in enumerate(keys):
        end = "," if position < len(keys) - 1 else ""
        if key != "types":
            lines.append(f" {json.dumps(key)}: {json.dumps(document[key])}{end}")
            continue
        lines.append(' "types": {')
        names = sorted(document["types"])
        for index, name in enumerate(names):
            comma = "," if index < len(names) - 1 else ""
            lines.append(f"  {json.dumps(name)}: {json.dumps(document['types'][name])}{comma}")
        lines.append(" }" + end)
    return "\n".join(lines) + "\n}\n"


def utc_today() -> datetime.date:
    return datetime.datetime.now(datetime.UTC).date()


def main(argv: list[str] | None = None, today: Callable[[], datetime.date] = utc_today) -> int:
    """``today``: the clock that dates each entry (the tests give theirs: a date read twice can straddle midnight)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--region", default="us-east-1", help="the Region to ask (default: us-east-1)")
    parser.add_argument("--profile", help="the AWS profile (default: the usual credential chain)")
    parser.add_argument("--endpoint-url", help="another EC2 endpoint (tests: a moto server)")
    parser.add_argument("--source", help="the source to record (default: 'DescribeInstanceTypes <region>')")
    parser.add_argument("--output", type=Path, default=FACTS, help="the data file to rewrite (default: the package's)")
    args = parser.parse_args(argv)

    import boto3

    session = boto3.Session(profile_name=args.profile, region_name=args.region)
    client = session.client("ec2", endpoint_url=args.endpoint_url)
    answers = describe(client, [t[len(PREFIX) :] for t in offered_types()])
    document = json.loads(args.output.read_text()) if args.output.exists() else {}
    checked = today().isoformat()
    source = args.source or f"DescribeInstanceTypes {args.region}"
    args.output.write_text(dump(refreshed(document, answers, source, checked)))
    print(f"{args.output}: {len(answers)} of {len(offered_types())} types from {source} ({checked})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
