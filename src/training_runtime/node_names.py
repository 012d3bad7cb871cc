"""A HyperPod node's Slurm name: ``ip-a-b-c-d`` or its instance name. The one rule, its inverse, and how a node
tells which of the two its cluster uses.

AWS's sources conflict (docs/node-runtime.md, "How a node finds itself"):

* AWS's field notes for its DevOps agent (awslabs/awsome-distributed-ai,
  ``1.architectures/5.sagemaker-hyperpod/tools/devops-agent/docs/hyperpod-mental-model.md``): "``NodeName=`` in
  ``slurm.conf`` is ``ip-N-N-N-N`` (derived from the customer-VPC IP), not the SageMaker ``InstanceName``
  (``<group>-<index>``)"; the same page lists ``/opt/ml/config/cluster_agent.json`` with
  ``SlurmConfiguration.UseInstanceNames``, present on the controller only ("Compute / Login: **no**").
* AWS's migration guide to API-driven Slurm configuration (``sagemaker-hyperpod-slurm-api-config-migration``)
  shows ``sinfo`` listing ``gpu-compute-[1-4]``: instance names.

So both exist. The controller reads ``UseInstanceNames``; other nodes have no such file and go by their host
name; where neither tells, the runtime takes ``ip-a-b-c-d`` (the field notes' statement) and says it guessed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

IP_NAMES = "ip"
"""Slurm node names are ``ip-a-b-c-d``, the first label of the instance's EC2 private DNS name."""
INSTANCE_NAMES = "instance"
"""Slurm node names are the instances' ``InstanceName`` (``<group>-<n>``): ``UseInstanceNames`` true."""
NAMING_MODES = (IP_NAMES, INSTANCE_NAMES)

IP_NAME = re.compile(r"^ip-(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})$")
"""An ``ip-a-b-c-d`` name; its groups are the address's four numbers (:func:`address_of`)."""

AGENT_CONFIG_KEY = "SlurmConfiguration.UseInstanceNames"


def ip_name(address: str) -> str:
    """``10.1.2.3`` -> ``ip-10-1-2-3``: the instance's host name on HyperPod's AMI and, in the ``ip`` mode, its Slurm
    node name (:func:`address_of` is the inverse)."""
    return "ip-" + address.replace(".", "-")


def private_dns_name(address: str, region: str) -> str:
    """``10.1.2.3`` in ``us-west-2`` -> ``ip-10-1-2-3.us-west-2.compute.internal``: an instance's EC2 private DNS name
    (``PrivateDnsHostname`` in ListClusterNodes) outside us-east-1; its first label is :func:`ip_name`."""
    return "{}.{}.compute.internal".format(ip_name(address), region)


def address_of(name: str) -> Optional[str]:
    """``ip-10-1-2-3`` -> ``10.1.2.3``; None for a name that is not an IPv4 address in :func:`ip_name`'s form."""
    match = IP_NAME.fullmatch(name.split(".", 1)[0])
    if match is None or any(int(part) > 255 for part in match.groups()):
        return None
    return ".".join(match.groups())


def slurm_name(naming: str, instance_name: str, address: str) -> str:
    """The Slurm node name (and host name) of the instance ``instance_name`` at ``address`` under ``naming``."""
    if naming not in NAMING_MODES:
        raise ValueError("naming: got {!r}; allowed: {}".format(naming, ", ".join(NAMING_MODES)))
    return instance_name if naming == INSTANCE_NAMES else ip_name(address)


@dataclass(frozen=True)
class Naming:
    """Which names this node's cluster gives Slurm nodes, how the node knows, and what it had to guess."""

    mode: str
    source: str
    warning: Optional[str] = None
    """Set when the runtime could not read the answer and took one: the plan and the log repeat it."""


def use_instance_names(data: Any) -> Optional[bool]:
    """``SlurmConfiguration.UseInstanceNames`` of a parsed ``cluster_agent.json``; None when absent or not a
    boolean."""
    slurm = data.get("SlurmConfiguration") if isinstance(data, dict) else None
    value = slurm.get("UseInstanceNames") if isinstance(slurm, dict) else None
    return value if isinstance(value, bool) else None


def decide_naming(agent_config: Path, hostname: str, instance_name: str, address: str) -> Naming:
    """The naming of the cluster this node (``instance_name`` at ``address``, host name ``hostname``) is in.

    ``cluster_agent.json``'s ``UseInstanceNames`` when the file has it (HyperPod writes it on the controller);
    else the host name when it is one of the node's two names; else ``ip``. All but the first carry a warning.
    """
    why = "{} does not exist (HyperPod writes it on the controller only)".format(agent_config)
    try:
        value = use_instance_names(json.loads(agent_config.read_text()))
        if value is not None:
            return Naming(INSTANCE_NAMES if value else IP_NAMES, "{} {}".format(agent_config, AGENT_CONFIG_KEY))
        why = "{} has no boolean {}".format(agent_config, AGENT_CONFIG_KEY)
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as error:
        why = "{} is unreadable ({})".format(agent_config, error)
    if hostname == instance_name and hostname != ip_name(address):
        mode, source, how = INSTANCE_NAMES, "host name", "its host name {!r} is its InstanceName".format(hostname)
    elif hostname == ip_name(address):
        mode, source, how = IP_NAMES, "host name", "its host name {!r} is its ip-a-b-c-d name".format(hostname)
    else:
        mode, source = IP_NAMES, "default"
        how = "its host name {!r} is neither of its names; AWS's field notes say ip-a-b-c-d".format(hostname)
    warning = (
        "Slurm node names taken to be {} names: {}, and {} [inferred; AWS's sources disagree on the naming, "
        "docs/node-runtime.md]".format(mode, why, how)
    )
    return Naming(mode, source, warning)
