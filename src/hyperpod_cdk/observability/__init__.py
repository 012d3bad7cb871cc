"""Observability of a cluster: the Grafana dashboards shipped with the library."""

from hyperpod_cdk.observability.dashboards import (
    DASHBOARDS,
    PanelQuery,
    TemplateVariable,
    dashboard_json,
    panel_queries,
    render_query,
    template_variables,
)

__all__ = [
    "DASHBOARDS",
    "PanelQuery",
    "TemplateVariable",
    "dashboard_json",
    "panel_queries",
    "render_query",
    "template_variables",
]
