"""Rules on the external accounting database HyperPod is given (``Orchestrator.Slurm.AccountingDatabase``), which
API-driven mode with continuous provisioning renders from ``runtime.accounting``
(:func:`hyperpod_cdk.core.accounting.slurmdbd_owner`). The port and the secret's ARN are the runtime's rules already
(RT-ACCOUNTING-PORT: 1-65535, as the API; RT-ACCOUNTING-EXTERNAL: a stricter ARN pattern than the API's)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_cdk.aws_data.api_support import api_rule, support_row
from hyperpod_cdk.core.accounting import (
    ACCOUNTING_DATABASE_API,
    external_database,
    slurmdbd_owner,
)
from hyperpod_cdk.model import SlurmMode
from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.params import SLURMDBD_BY_HYPERPOD
from training_runtime.problems import WARNING, Problem

ENDPOINT_PATTERN = re.compile(
    r"^(?=.{1,255}$)([a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?)*$"
)
"""ClusterAccountingDatabase.Endpoint's pattern, as the API reference states it."""

rule = REGISTRY.rule


@rule(
    "CL-ACCOUNTING-ENDPOINT",
    "runtime",
    "runtime.accounting.host",
    needs=("cluster",),
    source=f"{ACCOUNTING_DATABASE_API} (Endpoint: 1-255 characters, pattern)",
)
def accounting_endpoint(view: ClusterView) -> Iterator[Problem]:
    """A database HyperPod is given has a host the API accepts: a DNS name (labels of letters, digits, hyphens)."""
    options = view.runtime_options
    if options is None or slurmdbd_owner(view.mode, view.node_provisioning_mode, options.accounting) != (
        SLURMDBD_BY_HYPERPOD
    ):
        return
    host = options.accounting.host
    if host is not None and view.concrete(host) and not ENDPOINT_PATTERN.fullmatch(host):
        yield Problem(
            view.path("runtime", "accounting.host"),
            "HyperPod is given this database (AccountingDatabase.Endpoint) and accepts a DNS name such as "
            "'acct.abc123.us-east-1.rds.amazonaws.com' or an IPv4 address: 1-255 characters, dot-separated labels "
            "of letters, digits and hyphens",
            got=host,
        )


@rule(
    "CL-ACCOUNTING-CONTINUOUS",
    "runtime",
    "runtime.accounting.database",
    needs=("cluster",),
    level=WARNING,
    source=f"hyperpod-cdk: how the template keeps {support_row('accounting-continuous').source} "
    "(data/api_support.yaml row accounting-continuous)",
)
def accounting_continuous(view: ClusterView) -> Iterator[Problem]:
    """In api-driven mode without continuous provisioning, the runtime, not HyperPod, runs slurmdbd for the database."""
    options = view.runtime_options
    if options is None or view.mode != SlurmMode.API_DRIVEN or not external_database(options.accounting):
        return
    if slurmdbd_owner(view.mode, view.node_provisioning_mode, options.accounting) == SLURMDBD_BY_HYPERPOD:
        return
    yield Problem(
        view.path("runtime", "accounting.database"),
        "HyperPod takes an external accounting database (AccountingDatabase) only with continuous node "
        "provisioning, so the runtime runs slurmdbd on the controller against it instead",
        got="external",
        fix="to have HyperPod run slurmdbd, set node_provisioning_mode: continuous (new clusters only; once "
        "attached, the database cannot be detached from the cluster)",
    )


@api_rule(rule, "accounting-permanent", "runtime", "runtime.accounting.database", needs=("cluster",))
def accounting_permanent(view: ClusterView) -> Iterator[Problem]:
    """HyperPod is given an external accounting database: the cluster keeps it (informational)."""
    options = view.runtime_options
    if options is None or slurmdbd_owner(view.mode, view.node_provisioning_mode, options.accounting) != (
        SLURMDBD_BY_HYPERPOD
    ):
        return
    yield Problem(
        view.path("runtime", "accounting.database"),
        "HyperPod is given this external accounting database (AccountingDatabase), and a cluster that has one "
        "cannot revert to the internal MariaDB database later",
        got="external",
        fix="nothing to fix; create a new cluster if it must ever run without this database",
    )


@rule(
    "CL-ACCOUNTING-TLS",
    "runtime",
    "runtime.accounting.ca_bundle_sha256",
    needs=("cluster",),
    source="slurmdbd.conf(5) StorageParameters (SSL_CA: the path name of the Certificate Authority certificate file)",
)
def accounting_tls(view: ClusterView) -> Iterator[Problem]:
    """Where the runtime runs slurmdbd against an external database, it connects over TLS and needs the sha256 of the
    CA bundle it downloads (it trusts no file nobody checked)."""
    options = view.runtime_options
    if options is None or not external_database(options.accounting):
        return
    if slurmdbd_owner(view.mode, view.node_provisioning_mode, options.accounting) == SLURMDBD_BY_HYPERPOD:
        return  # HyperPod configures slurmdbd (and its connection) itself
    if options.accounting.ca_bundle_sha256 is None:
        yield Problem(
            view.path("runtime", "accounting.ca_bundle_sha256"),
            "the controller's slurmdbd reaches the external database over TLS (StorageParameters=SSL_CA=...) and "
            f"checks the CA bundle it downloads from {options.accounting.ca_bundle_url} against this sha256",
            fix="download the bundle yourself, check it, and set ca_bundle_sha256 to `sha256sum`'s first field "
            '(docs/configuration.md, runtime.accounting: "The accounting database over TLS")',
        )
