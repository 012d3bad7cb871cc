"""An in-memory backend: instances that exist only as records (the unit tests' backend, no root needed)."""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass, field

from hyperpod_local.control_plane.fleet import LaunchError
from hyperpod_local.control_plane.model import Group, Instance
from hyperpod_local.layout import LOCAL_REGION
from training_runtime.node_names import private_dns_name


@dataclass
class MemoryBackend:
    """Allocates addresses from ``subnet``; records what it did in ``log``. ``failing`` instance ids fail to boot."""

    subnet: str = "10.1.0.0/24"
    log: list[tuple[str, str]] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)
    allocated: int = 0

    def allocate(self, group: Group) -> Instance:
        self.allocated += 1
        ip = str(ipaddress.IPv4Network(self.subnet)[100 + self.allocated])
        instance_id = "i-" + hashlib.sha256(f"{group.name}/{self.allocated}".encode()).hexdigest()[:17]
        name = f"{group.name}-{self.allocated}"
        return Instance(instance_id, ip, private_dns_name(ip, LOCAL_REGION), name)

    def boot(self, group: Group, instance: Instance) -> None:
        self.log.append(("boot", instance.instance_id))
        if instance.instance_id in self.failing:
            raise LaunchError("the lifecycle script failed")

    def terminate(self, instance: Instance) -> None:
        self.log.append(("terminate", instance.instance_id))

    def reboot(self, instance: Instance) -> None:
        self.log.append(("reboot", instance.instance_id))

    def replace(self, instance: Instance) -> None:
        self.log.append(("replace", instance.instance_id))

    def reimage(self, instance: Instance) -> None:
        self.log.append(("reimage", instance.instance_id))
        if instance.instance_id in self.failing:
            raise LaunchError("the lifecycle script failed")
