"""The cluster's events, as ListClusterEvents returns them (``ClusterEventSummary``).

Cluster events exist only for clusters whose ``NodeProvisioningMode`` is Continuous (AWS, "SageMaker HyperPod
cluster events reference", https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-cluster-events-reference.html).
The reference lists event types but not the exact descriptions of each, so the emulator's descriptions are its
own words; the fields and levels (Info, Warn, Error) are the API's
(https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ListClusterEvents.html).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

INFO, WARN, ERROR = "Info", "Warn", "Error"
CLUSTER, GROUP, INSTANCE = "Cluster", "InstanceGroup", "Instance"


@dataclass(frozen=True)
class Event:
    event_id: str
    time: float
    resource_type: str
    description: str
    level: str
    group: str | None = None
    instance_id: str | None = None

    def summary(self, cluster_name: str, cluster_arn: str) -> dict[str, Any]:
        found: dict[str, Any] = {
            "EventId": self.event_id,
            "ClusterArn": cluster_arn,
            "ClusterName": cluster_name,
            "ResourceType": self.resource_type,
            "EventTime": self.time,
            "Description": self.description,
            "EventLevel": self.level,
        }
        if self.group:
            found["InstanceGroupName"] = self.group
        if self.instance_id:
            found["InstanceId"] = self.instance_id
        return found


class EventLog:
    """Events in the order they happened; ``listener`` (optional) sees each one (the server logs them)."""

    def __init__(self, clock: Callable[[], float], listener: Callable[[Event], None] | None = None) -> None:
        self.clock = clock
        self.events: list[Event] = []
        self.listener = listener
        self.lock = threading.Lock()

    def record(
        self,
        description: str,
        *,
        level: str = INFO,
        group: str | None = None,
        instance_id: str | None = None,
        resource_type: str | None = None,
    ) -> Event:
        kind = resource_type or (INSTANCE if instance_id else GROUP if group else CLUSTER)
        event = Event(str(uuid.uuid4()), self.clock(), kind, description, level, group, instance_id)
        with self.lock:
            self.events.append(event)
        if self.listener:
            self.listener(event)
        return event

    def select(self, params: dict[str, Any]) -> list[Event]:
        """The events ListClusterEvents' filters keep, in its order (EventTime, ascending unless asked)."""
        after, before = params.get("EventTimeAfter"), params.get("EventTimeBefore")
        with self.lock:
            chosen = [
                e
                for e in self.events
                if params.get("InstanceGroupName") in (None, e.group)
                and params.get("NodeId") in (None, e.instance_id)
                and params.get("ResourceType") in (None, e.resource_type)
                and (after is None or e.time > float(after))
                and (before is None or e.time < float(before))
            ]
        chosen.sort(key=lambda e: e.time, reverse=params.get("SortOrder") == "Descending")
        return chosen
