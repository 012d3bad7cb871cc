"""Prices: the Price List API's answer parsed from a recorded (constructed) response, the shipped snapshot, the
config's override, and the source each price carries.

The Price List path uses botocore's Stubber, not moto: moto 5.2 implements no ``pricing`` service. The recorded
response (tests/fixtures/pricing_get_products.json) is constructed by hand in the documented ``aws_v1`` format;
its figures are made up."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from hyperpod_cdk.aws_data.prices import parse_price_list, resolve, snapshot, snapshot_prices
from hyperpod_cdk.ops.price_list import fetch_prices, filters
from training_runtime.billing_weights import InstancePrice, partition_weights
from training_runtime.hardware import hardware_for

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "pricing_get_products.json").read_text())


def stubbed_pricing():
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    stub = Stubber(client)
    base = {"ServiceCode": "AmazonSageMaker", "Filters": filters("us-east-1"), "FormatVersion": "aws_v1"}
    stub.add_response("get_products", RECORDED["pages"][0], base)
    stub.add_response("get_products", RECORDED["pages"][1], {**base, "NextToken": "page-2"})
    return client, stub


def test_the_price_list_answer_is_read_page_by_page_and_only_cluster_instances_count() -> None:
    client, stub = stubbed_pricing()
    with stub:
        found = fetch_prices(client, "us-east-1")
    stub.assert_no_pending_responses()
    # volume usage and the -Reserved usage type are not instance prices
    assert {t: (p.per_hour, p.source) for t, p in found.items()} == {
        "ml.p5.48xlarge": (55.04, "price-list 2026-11-15"),
        "ml.m5.xlarge": (0.276, "price-list 2026-11-15"),
    }
    assert filters("eu-west-1")[0] == {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "eu-west-1"}


def test_entries_of_another_region_or_currency_are_skipped() -> None:
    page = RECORDED["pages"][0]["PriceList"]
    assert parse_price_list(page, "eu-west-1") == {}
    assert parse_price_list(page, "us-east-1", currency="CNY") == {}


def test_the_snapshot_names_its_date_source_and_currency() -> None:
    data = snapshot()
    assert data["date"] == "2026-11-29" and data["currency"] == "USD"
    assert "Not fetched by hyperpod-cdk" in data["source"]
    (price,) = snapshot_prices("us-west-2").values()
    assert (price.instance_type, price.per_hour, price.source) == (
        "ml.p4d.24xlarge",
        25.91001756,
        "snapshot 2026-11-29",
    )
    assert snapshot_prices("xx-nowhere-1") == {} and snapshot_prices(None) == {}


def test_the_config_overrides_the_price_list_which_overrides_the_snapshot() -> None:
    live = parse_price_list(RECORDED["pages"][0]["PriceList"] + RECORDED["pages"][1]["PriceList"], "us-east-1")
    assert live["ml.p5.48xlarge"].per_hour == 55.04  # the config's rate below beats the Price List's
    found = resolve(
        ["ml.g5.8xlarge", "ml.m5.xlarge", "ml.p5.48xlarge", "ml.trn1.32xlarge"],
        "us-east-1",
        overrides={"ml.p5.48xlarge": (41.5, "savings plan SP-123, 2026")},
        live=live,
    )
    assert {t: (p.per_hour, p.source) for t, p in found.prices.items()} == {
        "ml.g5.8xlarge": (3.06, "snapshot 2026-11-29"),
        "ml.m5.xlarge": (0.276, "price-list 2026-11-15"),
        "ml.p5.48xlarge": (41.5, "config: savings plan SP-123, 2026"),
    }
    assert found.missing == ("ml.trn1.32xlarge",)


def test_the_snapshot_is_not_used_for_another_currency() -> None:
    found = resolve(["ml.g5.8xlarge"], "us-east-1", currency="EUR")
    assert found.prices == {} and found.missing == ("ml.g5.8xlarge",)


@pytest.mark.parametrize(
    "usage", ["USE1-Cluster:ml.p5.48xlarge-Reserved", "USE1-Train:ml.p5.48xlarge", "USE1-Cluster:VolumeUsage.gp3"]
)
def test_other_usage_types_are_not_hyperpod_instances(usage: str) -> None:
    item = json.loads(RECORDED["pages"][0]["PriceList"][0])
    item["product"]["attributes"]["usagetype"] = usage
    assert parse_price_list([json.dumps(item)], "us-east-1") == {}


def test_the_snapshot_script_rewrites_a_region_from_the_price_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "price_snapshot", Path(__file__).parents[1] / "scripts" / "price_snapshot.py"
    )
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    target = tmp_path / "prices_snapshot.json"
    target.write_text(json.dumps(snapshot()))
    client, stub = stubbed_pricing()
    monkeypatch.setattr(script, "SNAPSHOT", target)
    monkeypatch.setattr(script, "pricing_client", lambda session: client)
    monkeypatch.setattr(script, "make_session", lambda profile, region: None)
    with stub:
        assert script.main(["--region", "us-east-1"]) == 0
    written = json.loads(target.read_text())
    assert set(written["regions"]["us-east-1"]) == {"ml.p5.48xlarge", "ml.m5.xlarge"}
    assert written["regions"]["us-east-1"]["ml.p5.48xlarge"]["per_hour"] == 55.04
    assert "price-list 2026-11-15" in written["regions"]["us-east-1"]["ml.p5.48xlarge"]["record"]
    assert written["regions"]["us-west-2"] == snapshot()["regions"]["us-west-2"]  # a Region not asked is kept
    assert "Price List API" in written["source"]


def most_cpus(instance_type: str) -> int:
    """Slurm's CPUs per node with two threads per core: the most CPUs, so the smallest weight per CPU."""
    return hardware_for(instance_type, {}, 2).cpus  # type: ignore[union-attr]


def one_cpu_billing(price_per_hour: float, instance_type: str, cpus_per_node: int | None = None) -> int:
    """What Slurm bills per minute for a 1-CPU job in a partition of ``instance_type`` priced ``price_per_hour``:
    the partition's weight as synth writes it (``TRESBillingWeights``), times 1 CPU, rounded down as Slurm 24.11 does
    (docs/cost.md, "Precision")."""
    cpus = cpus_per_node or most_cpus(instance_type)
    weights, _ = partition_weights({"p": [(instance_type, cpus)]}, {instance_type: InstancePrice(price_per_hour, "t")})
    return int(float(weights["p"].removeprefix("CPU=")))


def test_no_priced_cpu_bills_zero_cheapest_snapshot_type_nor_a_cheap_config_price() -> None:
    """Issue #32: at 1/1000 of the currency per billing-minute an ml.c5.4xlarge at about 0.82 per hour weighed 0.85
    per CPU, so a 1-CPU job billed 0 and escaped its team's budget. Every priced CPU must weigh 1 or more."""
    priced = [
        (price.per_hour / most_cpus(kind), price.per_hour, kind)
        for region in snapshot()["regions"]
        for kind, price in snapshot_prices(region).items()
    ]
    assert priced, "the snapshot prices no type"
    _, cheapest_price, cheapest_type = min(priced)
    assert one_cpu_billing(cheapest_price, cheapest_type) >= 1, (cheapest_type, cheapest_price)
    assert one_cpu_billing(0.816, "ml.c5.4xlarge") >= 1  # CPU weight 0.85 at 1/1000 (docs/cost.md)
    assert one_cpu_billing(0.05, "ml.t3.medium", cpus_per_node=2) >= 1  # a config price of 0.05/h on 2 CPUs
