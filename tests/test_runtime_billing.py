"""Prices as Slurm billing on the node: the CPU weight that makes a whole node bill its price, the partition line
of the rendered slurm.conf, and the HyperPod controller's `scontrol update` (HyperPod owns slurm.conf)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from runtime_fakes import CLUSTER_GROUPS, RecordingRunner, fake_node
from training_runtime.billing import BILLING_UNITS_PER_CURRENCY, billing_minutes, money, node_billing_per_minute
from training_runtime.billing_weights import InstancePrice, cpu_weight, partition_weights, weights_text
from training_runtime.hardware import hardware_for
from training_runtime.params import ProvisioningParameters
from training_runtime.render import Partition, SlurmNode, SlurmSettings, render_slurm_conf
from training_runtime.steps.billing import HyperPodBillingWeights, billing_weights, current_weights
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.configless import ConfiglessPush
from training_runtime.steps.slurm import partitions

TRN1 = InstancePrice(21.5, "config: training plan tp-1")
SCONTROL = "/opt/slurm/bin/scontrol"


def test_a_whole_node_bills_its_price_per_minute_in_billing_units() -> None:
    # 98.32 per hour = 98.32 / 60 = 1.638666... of the currency per minute; spread over 192 CPUs
    weight = cpu_weight(98.32, 192)
    per_minute = 98.32 / 60 * BILLING_UNITS_PER_CURRENCY
    assert weight * 192 == pytest.approx(node_billing_per_minute(98.32)) == pytest.approx(per_minute, abs=1e-4)
    assert weights_text(weight) == "CPU={}".format(("%.6f" % (per_minute / 192)).rstrip("0").rstrip("."))
    assert weights_text(8.5) == "CPU=8.5"
    with pytest.raises(ValueError, match="cpus: got 0"):
        cpu_weight(1.0, 0)


def test_partitions_without_a_price_keep_slurms_default_and_mixed_types_bill_the_dearest_cpu() -> None:
    prices = {"a": InstancePrice(60.0, "snapshot x"), "b": InstancePrice(30.0, "snapshot x")}
    weights, notes = partition_weights({"p": [("a", 100)], "q": [("c", 4)], "m": [("a", 100), ("b", 100)]}, prices)
    # 60/h = 1 of the currency per minute over 100 CPUs
    ten = weights_text(BILLING_UNITS_PER_CURRENCY / 100)
    assert weights == {"p": ten, "m": ten}
    assert notes == [
        "partition m: instance types a, b differ in price per CPU; billed at the highest",
        "partition q: no price for c; it keeps Slurm's default billing (allocated CPUs)",
    ]


def priced(params: ProvisioningParameters) -> ProvisioningParameters:
    return dataclasses.replace(params, prices={"ml.trn1.32xlarge": TRN1})


def test_the_rendered_slurm_conf_carries_the_weights_on_the_partition_line(tmp_path: Path) -> None:
    node = fake_node(tmp_path)
    node.params = priced(node.params)  # type: ignore[misc]
    cpus = hardware_for("ml.trn1.32xlarge", {}, 1).cpus  # type: ignore[union-attr]
    expected = weights_text(cpu_weight(21.5, cpus))
    assert billing_weights(node) == ({"trn": expected}, [])
    assert [(p.name, p.billing_weights) for p in partitions(node)] == [("trn", expected)]
    text = render_slurm_conf(
        SlurmSettings(cluster_name="t", controller_name="c", controller_address="10.0.0.1"),
        [SlurmNode("w1", "10.0.0.2", None)],
        [Partition("trn", ("w1",), billing_weights=expected), Partition("cpu", ("w1",))],
    )
    assert f"PartitionName=trn Nodes=w1 Default=YES MaxTime=INFINITE State=UP TRESBillingWeights={expected}" in text
    assert "PartitionName=cpu Nodes=w1 Default=NO MaxTime=INFINITE State=UP\n" in text + "\n"


def hyperpod_controller(tmp_path: Path, runner: RecordingRunner):  # type: ignore[no-untyped-def]
    node = fake_node(tmp_path, instance="controller-1", mode="api-driven", runner=runner, groups=CLUSTER_GROUPS)
    node.params = priced(node.params)  # type: ignore[misc]
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True, exist_ok=True)
    return node


def test_the_hyperpod_controller_sets_the_weights_with_scontrol_and_then_changes_nothing(tmp_path: Path) -> None:
    runner = RecordingRunner({(SCONTROL, "-o", "show", "partition"): (0, "PartitionName=trn TotalNodes=2\n")})
    node = hyperpod_controller(tmp_path, runner)
    assert any(isinstance(s, HyperPodBillingWeights) for s in steps_for(node))
    weights = billing_weights(node)[0]["trn"]
    step = HyperPodBillingWeights()
    assert step.needed(node)
    step.apply(node)
    assert runner.ran(SCONTROL, "update") == [
        [SCONTROL, "update", "PartitionName=trn", "TRESBillingWeights=" + weights]
    ]
    runner.respond[(SCONTROL, "-o", "show", "partition")] = (0, f"PartitionName=trn TRESBillingWeights={weights}\n")
    assert not step.needed(node)


def test_the_weights_are_set_after_every_step_that_reconfigures_slurmctld(tmp_path: Path) -> None:
    """`scontrol reconfigure` (the configless pushes) re-reads slurm.conf and drops weights set by `scontrol update`:
    on Slurm 24.11 the weights set before the pushes were gone once the controller's bootstrap ended."""
    node = hyperpod_controller(tmp_path, RecordingRunner({}))
    steps = steps_for(node)
    at = next(i for i, s in enumerate(steps) if isinstance(s, HyperPodBillingWeights))
    pushes = [i for i, s in enumerate(steps) if isinstance(s, ConfiglessPush)]
    assert pushes and max(pushes) < at, [s.name for s in steps]


def test_no_prices_no_billing_step(tmp_path: Path) -> None:
    node = fake_node(tmp_path, instance="controller-1", mode="api-driven")
    (tmp_path / "opt/sagemaker_cluster").mkdir(parents=True, exist_ok=True)
    assert not any(isinstance(s, HyperPodBillingWeights) for s in steps_for(node))


def test_current_weights_reads_scontrols_line() -> None:
    assert current_weights("PartitionName=p TRESBillingWeights=CPU=8.5 TotalCPUs=4") == "CPU=8.5"
    assert current_weights("PartitionName=p TRESBillingWeights=(null)") is None
    assert current_weights("PartitionName=p") is None


def test_prices_travel_in_the_parameters_file_and_are_checked() -> None:
    params = priced(ProvisioningParameters(cluster_name="t", mode="api-driven", groups=CLUSTER_GROUPS))
    data = params.to_json()
    assert data["hyperpod_cdk"]["prices"] == {
        "ml.trn1.32xlarge": {"per_hour": 21.5, "source": "config: training plan tp-1"}
    }
    assert ProvisioningParameters.from_json(data).prices == params.prices
    data["hyperpod_cdk"]["prices"] = {"ml.trn1.32xlarge": {"per_hour": -1, "source": "x"}}
    with pytest.raises(Exception, match=r"hyperpod_cdk.prices.ml.trn1.32xlarge: got .*per_hour: a number >= 0"):
        ProvisioningParameters.from_json(data)
    plain = ProvisioningParameters(cluster_name="t", mode="api-driven", groups=CLUSTER_GROUPS).to_json()
    assert "prices" not in plain["hyperpod_cdk"]


def test_budgets_and_usage_convert_between_money_and_billing_minutes() -> None:
    """A budget in money is whole billing-minutes (rounded down, never lost to binary floating point), and usage
    in billing-minutes is money again."""
    for amount in (0, 0.03226, 48.96, 293.76, 500, 20000):
        assert billing_minutes(amount) == round(amount * BILLING_UNITS_PER_CURRENCY)
        assert money(billing_minutes(amount)) == pytest.approx(amount)
    assert billing_minutes(1.9 / BILLING_UNITS_PER_CURRENCY) == 1  # a part of a unit is rounded down
    with pytest.raises(ValueError, match="amount: got -1; a budget is zero or more"):
        billing_minutes(-1)
