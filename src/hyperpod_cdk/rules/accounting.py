"""Rules on the external accounting database HyperPod configures (``Orchestrator.Slurm.AccountingDatabase``), which
API-driven mode renders from ``runtime.accounting``."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_cdk.model import NodeProvisioningMode, SlurmMode
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.options import AccountingOptions
from training_runtime.problems import Problem

ACCOUNTING_DOC = (
    "AWS::SageMaker::Cluster ClusterAccountingDatabase (../shared/research/schema-sagemaker-cluster.json: "
    "'Supported only with Continuous node provisioning')"
)
ENDPOINT_PATTERN = re.compile(
    r"^(?=.{1,255}$)([a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?)*$"
)
"""ClusterAccountingDatabase.Endpoint's pattern, as the schema states it."""

rule = REGISTRY.rule


def api_accounting(mode: str, accounting: AccountingOptions) -> bool:
    """Whether HyperPod gets the accounting database through the API: API-driven mode, external database on."""
    return mode == SlurmMode.API_DRIVEN and accounting.enabled and accounting.database == "external"


def _accounting(view: ClusterView) -> AccountingOptions | None:
    options = view.runtime_options
    if options is None or not api_accounting(view.mode, options.accounting):
        return None
    return options.accounting


@rule("CL-ACCOUNTING-CONTINUOUS", "runtime", "runtime.accounting", needs=("cluster",), source=ACCOUNTING_DOC)
def accounting_continuous(view: ClusterView) -> Iterator[Problem]:
    """In API-driven mode an external accounting database needs node_provisioning_mode continuous (HyperPod's rule)."""
    if _accounting(view) is None or view.node_provisioning_mode == NodeProvisioningMode.CONTINUOUS:
        return
    yield Problem(
        view.path("runtime", "accounting.database"),
        "in api-driven mode HyperPod connects slurmdbd to the external database (AccountingDatabase), which it "
        "supports only with continuous node provisioning",
        got="external",
        fix="set node_provisioning_mode: continuous (new clusters only)",
    )


@rule("CL-ACCOUNTING-ENDPOINT", "runtime", "runtime.accounting.host", needs=("cluster",), source=ACCOUNTING_DOC)
def accounting_endpoint(view: ClusterView) -> Iterator[Problem]:
    """In API-driven mode the external database's host is a DNS name HyperPod accepts (labels of letters, digits, -)."""
    accounting = _accounting(view)
    if accounting is None or accounting.host is None or not view.concrete(accounting.host):
        return
    if not ENDPOINT_PATTERN.match(accounting.host):
        yield Problem(
            view.path("runtime", "accounting.host"),
            "expected a DNS name such as 'acct.abc123.us-east-1.rds.amazonaws.com' (1-255 characters, dot-separated "
            "labels of letters, digits and hyphens)",
            got=accounting.host,
        )
