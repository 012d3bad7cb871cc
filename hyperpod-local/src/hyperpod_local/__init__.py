"""A HyperPod Slurm cluster emulated on one Linux machine (root only): nodes are namespaces with an
overlay root, the lifecycle scripts run on them as HyperPod runs them. See docs/local-cluster.md."""

from hyperpod_local.cluster import LocalCluster
from hyperpod_local.layout import (
    LayoutError,
    LocalLayout,
    LocalNode,
    plan_layout,
    resource_config,
)
from hyperpod_local.namespaces import NamespaceError, Namespaces, NodeNet
from hyperpod_local.overlay import (
    local_options,
    local_parameters,
)
from hyperpod_local.plan import UpOptions
from hyperpod_local.state import LocalClusterError, default_workdir
from hyperpod_local.variant import Variant, VariantError

__all__ = [
    "LayoutError",
    "LocalCluster",
    "LocalClusterError",
    "LocalLayout",
    "LocalNode",
    "NamespaceError",
    "Namespaces",
    "NodeNet",
    "UpOptions",
    "Variant",
    "VariantError",
    "default_workdir",
    "local_options",
    "local_parameters",
    "plan_layout",
    "resource_config",
]
