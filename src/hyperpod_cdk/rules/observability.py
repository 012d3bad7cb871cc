"""Rules on the ``observability`` section: the Prometheus workspace, Grafana and the alarm topic's addresses
(built by ``hyperpod_cdk.constructs.observability``; docs/observability.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_cdk.rules.registry import REGISTRY
from hyperpod_cdk.rules.shapes import field_of, matches
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import WARNING, Problem

WORKSPACE_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):aps:(?P<region>[a-z0-9-]+):(?P<account>[0-9]{12}):"
    r"workspace/(?P<id>[0-9A-Za-z][-.0-9A-Za-z_]{0,63})$"
)
"""An Amazon Managed Service for Prometheus workspace's ARN (Service Authorization Reference, resource type
``workspace``); the constructs read the workspace's Region and ID from it."""
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
"""An address SNS can send a subscription confirmation to (the ``email`` protocol's endpoint)."""

rule = REGISTRY.rule


def _at(view: ClusterView, field: str) -> str:
    return view.path("observability", field)


workspace_arn = rule(
    "OBS-WORKSPACE-ARN",
    "observability",
    "observability.workspace_arn",
    source="Service Authorization Reference: Amazon Managed Service for Prometheus, resource type workspace",
)(
    matches(
        "An existing Prometheus workspace is given by its ARN, arn:aws:aps:<region>:<account>:workspace/<id>.",
        field_of("observability", lambda view: view.observability, "workspace_arn"),
        WORKSPACE_ARN,
        "expected a workspace ARN such as "
        "'arn:aws:aps:us-west-2:111122223333:workspace/ws-12345678-abcd-1234-abcd-123456789012'",
        fix="copy it from `aws amp describe-workspace --workspace-id <id>`, or remove it to create a workspace",
    )
)


@rule(
    "OBS-DISABLED",
    "observability",
    "observability.{workspace_arn,grafana,alarms}",
    source="hyperpod-cdk (docs/observability.md)",
)
def disabled(view: ClusterView) -> Iterator[Problem]:
    """With observability off, nothing else in the section may ask for a resource."""
    obs = view.observability
    if obs is None or obs.enabled:
        return
    asked = [name for name in ("workspace_arn", "grafana") if getattr(obs, name)]
    asked += ["alarms.emails"] if obs.alarms.emails else []
    for name in asked:
        yield Problem(
            _at(view, name),
            "set while observability.enabled is false, so it would do nothing",
            fix="remove it, or set observability.enabled: true",
        )


@rule(
    "OBS-GRAFANA-SSO",
    "observability",
    "observability.grafana",
    level=WARNING,
    source="Amazon Managed Grafana User Guide: user authentication with IAM Identity Center",
)
def grafana_sso(view: ClusterView) -> Iterator[Problem]:
    """A Grafana workspace signs users in through IAM Identity Center, which must be enabled in the account."""
    obs = view.observability
    if obs is not None and obs.enabled and obs.grafana:
        yield Problem(
            _at(view, "grafana"),
            "the Grafana workspace signs users in with IAM Identity Center (AWS_SSO); the deployment fails where "
            "it is not enabled, and no user can sign in until one is assigned to the workspace",
            fix="enable IAM Identity Center (an organization instance) before deploying, then assign users or "
            "groups in the Grafana console",
        )


@rule(
    "OBS-ALARM-EMAIL",
    "observability",
    "observability.alarms.emails[*]",
    source="Amazon SNS Subscribe: email protocol",
)
def alarm_emails(view: ClusterView) -> Iterator[Problem]:
    """Each alarm address is an email address, listed once."""
    obs = view.observability
    seen: set[str] = set()
    for index, address in enumerate(obs.alarms.emails if obs is not None else []):
        at = _at(view, f"alarms.emails[{index}]")
        if not view.concrete(address):
            continue
        if not EMAIL.fullmatch(address):
            yield Problem(at, "expected an email address such as 'ml-platform@example.com'", got=address)
        elif address.lower() in seen:
            yield Problem(at, "listed twice (SNS keeps one subscription per address)", got=address, fix="remove it")
        seen.add(address.lower())


@rule(
    "OBS-WORKSPACE-REGION",
    "observability",
    "observability.workspace_arn",
    needs=("region",),
    level=WARNING,
    source="Amazon Managed Service for Prometheus: remote write endpoint per Region",
)
def workspace_region(view: ClusterView) -> Iterator[Problem]:
    """A workspace in another Region than the cluster works, but every sample crosses Regions."""
    obs = view.observability
    if obs is None or not obs.enabled or view.region is None or not view.concrete(obs.workspace_arn):
        return
    match = WORKSPACE_ARN.fullmatch(str(obs.workspace_arn))
    if match and match["region"] != view.region:
        yield Problem(
            _at(view, "workspace_arn"),
            f"the workspace is in {match['region']}, the cluster in {view.region}: the nodes remote-write across "
            "Regions (inter-Region data transfer, and metrics stop when that Region cannot be reached)",
            got=obs.workspace_arn,
            fix=f"use a workspace in {view.region}, or remove workspace_arn to create one",
        )
