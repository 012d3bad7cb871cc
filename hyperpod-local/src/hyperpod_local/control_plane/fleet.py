"""The cluster's nodes and their lives: launches after the emulated latency, capacity, termination, recovery.

Launches: a new node is ``Pending`` for the emulated launch latency (AWS: "15-25 minutes per instance batch";
  here seconds, a setting), then its instance is allocated and booted by the backend (the lifecycle script runs)
  and it becomes ``Running``. When the instance type's emulated capacity is used up the node stays Pending with
  an ``InsufficientCapacity`` message, the group's ``CurrentCount`` stays below its ``TargetCount``, an Error
  event is recorded, and the launch is retried (Continuous provisioning "retries worker launches in the
  background"; AWS does not document the message text or the retry interval).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from hyperpod_local.control_plane.events import ERROR, INFO, WARN, EventLog
from hyperpod_local.control_plane.model import (
    FAILURE,
    PENDING,
    RUNNING,
    SHUTTING_DOWN,
    SYSTEM_UPDATING,
    Group,
    Instance,
    Node,
)


class LaunchError(Exception):
    """The backend could not boot an instance; the message becomes the node's status message."""


class Backend(Protocol):
    """What runs the instances: :class:`MemoryBackend` for tests, ``local.LocalClusterBackend`` for real nodes."""

    def allocate(self, group: Group) -> Instance: ...

    def boot(self, group: Group, instance: Instance) -> None: ...

    def terminate(self, instance: Instance) -> None: ...

    def reboot(self, instance: Instance) -> None: ...

    def replace(self, instance: Instance) -> None: ...

    def reimage(self, instance: Instance) -> None: ...


@dataclass
class Settings:
    """The emulator's knobs: launch latency (s), retry interval after a capacity failure (s), capacity per
    instance type (most instances of that type at once; absent: unlimited)."""

    launch_latency: float = 2.0
    retry_interval: float = 2.0
    capacity: dict[str, int] = field(default_factory=dict)


def spawn_thread(work: Callable[[], None]) -> None:
    threading.Thread(target=work, daemon=True).start()


class Fleet:
    """The groups and nodes of one cluster, the backend that runs them, and the lock every change holds.
    ``settings`` is read at each reconciliation (a test may change it while running); ``spawn`` runs slow backend
    work (a thread by default; tests pass an inline runner)."""

    def __init__(
        self,
        groups: list[Group],
        nodes: list[Node],
        backend: Backend,
        *,
        settings: Callable[[], Settings] = Settings,
        clock: Callable[[], float] = time.time,
        spawn: Callable[[Callable[[], None]], None] = spawn_thread,
        events: EventLog | None = None,
    ) -> None:
        self.groups = {g.name: g for g in groups}
        self.nodes = list(nodes)
        self.backend = backend
        self.settings = settings
        self.clock = clock
        self.spawn = spawn
        self.events = events or EventLog(clock)
        self.lock = threading.RLock()

    def group(self, name: str) -> Group:
        return self.groups[name]

    def live(self, group: str) -> list[Node]:
        return [n for n in self.nodes if n.group == group and n.status != SHUTTING_DOWN]

    def current(self, group: str) -> int:
        return sum(1 for n in self.nodes if n.group == group and n.status == RUNNING)

    def find(self, node_id: str | None = None, logical_id: str | None = None) -> Node | None:
        for node in self.nodes:
            if (node_id and node.instance_id == node_id) or (logical_id and node.logical_id == logical_id):
                return node
        return None

    def new_node(self, group: Group, now: float) -> Node:
        node = Node(
            str(uuid.uuid4()), group.name, group.instance_type, PENDING, now, now + self.settings().launch_latency
        )
        self.nodes.append(node)
        return node

    def remove(self, node: Node, why: str) -> None:
        """The node leaves its group: its target goes down, a node without instance is gone at once, one with an
        instance shuts down (the backend terminates it) and then is gone."""
        group = self.group(node.group)
        group.target = max(0, group.target - 1)
        node.status, node.message = SHUTTING_DOWN, ""
        self.events.record(
            f"Node {node.instance_id or node.logical_id} {why}", group=node.group, instance_id=node.instance_id
        )
        if node.instance is None:
            self.nodes.remove(node)
        elif not node.launching:  # a launch in flight terminates its node when it ends
            self.terminate(node)

    def terminate(self, node: Node) -> None:
        instance = node.instance
        assert instance is not None

        def work() -> None:
            try:
                self.backend.terminate(instance)
            finally:
                with self.lock:
                    if node in self.nodes:
                        self.nodes.remove(node)
                    self.events.record(
                        f"Instance {instance.instance_id} terminated",
                        group=node.group,
                        instance_id=instance.instance_id,
                    )

        self.spawn(work)

    def start_recovery(self, node: Node, action: str) -> None:
        """Reboot, replace or (``reimage``, UpdateClusterSoftware) re-image the node's root volume in the background;
        the node shows Pending meanwhile (SystemUpdating for a re-image) and Running once done."""
        instance = node.instance
        assert instance is not None
        node.status, node.launching = (SYSTEM_UPDATING if action == "reimage" else PENDING), True
        self.events.record(
            f"Instance {instance.instance_id}: {action} started", group=node.group, instance_id=instance.instance_id
        )

        def work() -> None:
            try:
                {"reboot": self.backend.reboot, "replace": self.backend.replace, "reimage": self.backend.reimage}[
                    action
                ](instance)
                status, message, level = RUNNING, "", INFO
            except LaunchError as error:
                status, message, level = "Failure", str(error), ERROR
            with self.lock:
                node.launching = False
                if node.status == SHUTTING_DOWN:
                    self.terminate(node)
                    return
                node.status, node.message = status, message
                if action == "reimage":
                    node.last_software_update = self.clock()
                    self.settle_software_update(self.group(node.group))
                what = f"{action} done" if status == RUNNING else f"{action} failed: {message}"
                self.events.record(
                    f"Instance {instance.instance_id}: {what}",
                    level=level,
                    group=node.group,
                    instance_id=instance.instance_id,
                )

        self.spawn(work)

    def settle_software_update(self, group: Group) -> None:
        """The group's ``SoftwareUpdateStatus`` once no node of it is re-imaging: Failed if one failed, else
        Succeeded (the API model's sequence Pending -> InProgress -> Succeeded; no rollback on Slurm)."""
        nodes = [n for n in self.nodes if n.group == group.name and n.status != SHUTTING_DOWN]
        if any(n.status == SYSTEM_UPDATING for n in nodes):
            return
        group.software_update = "Failed" if any(n.status == FAILURE for n in nodes) else "Succeeded"
        self.events.record(f"Software update of {group.name}: {group.software_update}", group=group.name)

    # --- launches -------------------------------------------------------------------------------
    def reconcile(self) -> None:
        """Start each Pending node's launch whose latency has passed, unless its type's capacity is used up."""
        with self.lock:
            settings, now = self.settings(), self.clock()
            for node in list(self.nodes):
                if node.status != PENDING or node.launching or node.instance is not None or now < node.ready_at:
                    continue
                limit = settings.capacity.get(node.instance_type)
                used = sum(1 for n in self.nodes if n.instance is not None and n.instance_type == node.instance_type)
                if limit is not None and used >= limit:
                    node.ready_at = now + settings.retry_interval
                    node.message = f"InsufficientCapacity: not enough {node.instance_type} capacity; retrying"
                    if not node.capacity_short:
                        node.capacity_short = True
                        self.events.record(
                            f"Failed to launch a {node.instance_type} instance in {node.group}: insufficient capacity; "
                            "Continuous provisioning retries in the background",
                            level=ERROR,
                            group=node.group,
                        )
                    continue
                self.launch(node)

    def launch(self, node: Node) -> None:
        group = self.group(node.group)
        try:
            node.instance = self.backend.allocate(group)
        except LaunchError as error:  # no room for another instance (the local subnet): retried like capacity
            node.ready_at = self.clock() + self.settings().retry_interval
            if node.message != str(error):
                node.message = str(error)
                self.events.record(
                    f"Failed to launch an instance in {group.name}: {error}", level=ERROR, group=group.name
                )
            return
        node.launching, node.message, node.capacity_short = True, "", False
        instance = node.instance
        self.events.record(
            f"Instance {instance.instance_id} launching in {group.name}",
            group=group.name,
            instance_id=instance.instance_id,
        )

        def work() -> None:
            try:
                self.backend.boot(group, instance)
                failure = ""
            except LaunchError as error:
                failure = str(error) or "the instance did not boot"
            with self.lock:
                node.launching = False
                if node.status == SHUTTING_DOWN:
                    self.terminate(node)
                elif failure:
                    node.status, node.message = "Failure", failure
                    self.events.record(
                        f"Instance {instance.instance_id} failed: {failure}",
                        level=WARN,
                        group=group.name,
                        instance_id=instance.instance_id,
                    )
                else:
                    node.status = RUNNING
                    self.events.record(
                        f"Instance {instance.instance_id} is Running",
                        group=group.name,
                        instance_id=instance.instance_id,
                    )

        self.spawn(work)
