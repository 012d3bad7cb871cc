"""The instance metadata service answers root only (``runtime.security``): the firewall rules of
:mod:`training_runtime.imds_guard` on every node, put back at every boot.

Without them any job or login user reads the instance role's credentials from the metadata service (security review
H1). Every node gets them, the controller too: jobs do not run there, but the cluster's users can reach it (their
keys in the shared homes let them ``ssh`` to every cluster host, steps/users.py), and its role is the one that drives
the cluster. What the runtime itself asks the metadata service runs as root: the bootstrap (a flexible group's
instance type, the AWS CLI's Secrets Manager read), the Spot watcher, the scaler and the Prometheus agent (systemd
units, or daemons the bootstrap starts, without ``User=``); so do the AMI's own agents.

Addresses: EC2's IPv4 one, its IPv6 one where the node's kernel has IPv6 (``/proc/net/if_inet6``; Slurm clusters get
IPv6 addresses when their subnets have them), and, on the local cluster, the fake service its parameters name
(``hyperpod_cdk.emulation.imds_url``), the address the runtime reads there.

A reboot does not re-run the lifecycle script on HyperPod, and the kernel forgets firewall rules: with systemd a
``Type=oneshot`` unit enabled before the network comes up (``Before=network-pre.target``) applies the guard file the
step writes; without systemd (the local cluster) the command is recorded in
:data:`~training_runtime.services.BOOT_COMMANDS`, which the emulated boot runs first.

iptables: HyperPod's AMI is Ubuntu with Docker, whose package needs it; the generic platform installs it (catalog).
With ``imds_root_only: false`` the step removes what an earlier bootstrap put in place.
"""

from __future__ import annotations

import ipaddress
import json
from typing import List, Optional, Tuple
from urllib.parse import urlsplit

from training_runtime import services
from training_runtime.errors import StepFailed
from training_runtime.files import file_matches, write_file
from training_runtime.hyperpod_facts import IMDS_ENDPOINT, IMDS_ENDPOINT_IPV6
from training_runtime.imds_guard import CHAIN, CONFIG_PATH, IPV4, IPV6, Guard, Tables, Target, converge, converged
from training_runtime.node import Node
from training_runtime.paths import BIN_DIR
from training_runtime.run import CommandError
from training_runtime.steps import Step
from training_runtime.steps.installed import PACKAGE_NAME, program

PROGRAM = BIN_DIR + "/imds-guard"
UNIT = "hyperpod-cdk-imds-guard.service"
UNIT_FILE = "/etc/systemd/system/" + UNIT
PROGRAMS = {IPV4: ("iptables", "iptables-restore"), IPV6: ("ip6tables", "ip6tables-restore")}
IPV6_PROC = "/proc/net/if_inet6"
"""Exists where the kernel has IPv6 (even with no address yet): the IPv6 rule goes in too."""


def guard_program() -> str:
    return program("--apply " + CONFIG_PATH, module=PACKAGE_NAME + ".imds_guard")


def boot_unit() -> str:
    return (
        "# Installed by hyperpod-cdk (runtime.security.imds_root_only): the instance metadata service answers root\n"
        "# only. A reboot does not re-run the lifecycle script; this unit puts the firewall rules back.\n"
        "[Unit]\nDescription=hyperpod-cdk: instance metadata for root only\nDefaultDependencies=no\n"
        "Wants=network-pre.target\nAfter=local-fs.target\nBefore=network-pre.target shutdown.target\n"
        "Conflicts=shutdown.target\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart={}\n\n"
        "[Install]\nWantedBy=multi-user.target\n".format(PROGRAM)
    )


def metadata_targets(node: Node) -> Tuple[Target, ...]:
    """The metadata service addresses this node's rules cover (see the module's docstring)."""
    targets = [Target(IPV4, urlsplit(IMDS_ENDPOINT).hostname or "")]
    if node.path(IPV6_PROC).exists():
        targets.append(Target(IPV6, IMDS_ENDPOINT_IPV6))
    emulation = node.params.emulation
    if emulation is not None and emulation.imds_url is not None:
        parts = urlsplit(emulation.imds_url)
        try:
            address = ipaddress.ip_address(parts.hostname or "")
        except ValueError:
            raise StepFailed(
                "hyperpod_cdk.emulation.imds_url {!r}: the guard needs an IP address, not a name".format(
                    emulation.imds_url
                )
            ) from None
        fake = Target(IPV4 if address.version == 4 else IPV6, str(address), parts.port or 80)
        if fake.address not in {t.address for t in targets}:
            targets.append(fake)
    return tuple(targets)


class ImdsGuard(Step):
    """Owner-match rules: the metadata service for root and ``runtime.security.imds_groups`` only."""

    name = "imds-guard"

    def _guard(self, node: Node) -> Guard:
        """The guard this node's options ask for (no target: none); StepFailed naming a group the node lacks."""
        security = node.options.security
        if not security.imds_root_only:
            return Guard(())
        gids = []
        for name in security.imds_groups:
            gid = node.host.group_id(name)
            if gid is None:
                raise StepFailed(
                    "runtime.security.imds_groups names group {!r}, which this node does not have, so its members "
                    "could not be let through to the instance metadata service. Fix: create the group on every node "
                    "(an earlier lifecycle step, or the AMI), or remove it from imds_groups".format(name)
                )
            gids.append(gid)
        return Guard(metadata_targets(node), tuple(sorted(set(gids))))

    def _tables(self, node: Node, guard: Guard) -> List[Tables]:
        """The address families to converge: those the guard covers (StepFailed when the node lacks their
        programs), and, to remove old rules, any other whose programs the node has."""
        tables = []
        for family, (iptables, restore) in PROGRAMS.items():
            found = node.which(iptables), node.which(restore)
            if found[0] is not None and found[1] is not None:
                tables.append(Tables(family, found[0], found[1]))
            elif guard.targets_of(family):
                lacking = " and ".join(name for name in (iptables, restore) if node.which(name) is None)
                raise StepFailed(
                    "{} and {} are needed to keep the instance metadata service for root only, and this node lacks "
                    "{}. Fix: install the iptables package (HyperPod's AMI has it), or set "
                    "runtime.security.imds_root_only: false (every user on the node can then read the instance "
                    "role's credentials)".format(iptables, restore, lacking)
                )
        return tables

    def _files(self, node: Node, guard: Guard, tables: List[Tables]) -> List[Tuple[str, str, int]]:
        files = [
            (CONFIG_PATH, json.dumps(guard.to_json(tables), indent=2, sort_keys=True) + "\n", 0o644),
            (PROGRAM, guard_program(), 0o755),
        ]
        if node.has_systemd:
            files.append((UNIT_FILE, boot_unit(), 0o644))
        return files

    def _boot_enabled(self, node: Node) -> bool:
        if node.has_systemd:
            return services.unit_enabled(node, UNIT)
        return services.boot_command_enabled(node, UNIT, [PROGRAM])

    def _wanted(self, node: Node) -> Optional[Tuple[Guard, List[Tables]]]:
        """(guard, tables), or None when the node cannot tell yet (a group or a program missing: apply says which)."""
        try:
            guard = self._guard(node)
            return guard, self._tables(node, guard)
        except StepFailed:
            return None

    def _leftovers(self, node: Node) -> List[str]:
        """With the guard off: what an earlier bootstrap left (files, the boot entry)."""
        paths = [CONFIG_PATH, PROGRAM, UNIT_FILE]
        left = [p for p in paths if node.path(p).exists()]
        if not node.has_systemd and services.boot_command_enabled(node, UNIT, [PROGRAM]):
            left.append(services.BOOT_COMMANDS)
        return left

    def needed(self, node: Node) -> bool:
        wanted = self._wanted(node)
        if wanted is None:
            return True
        guard, tables = wanted
        if guard.targets:
            stale = any(not file_matches(node, p, c, m) for p, c, m in self._files(node, guard, tables))
            if stale or not self._boot_enabled(node):
                return True
        elif self._leftovers(node):
            return True
        try:
            return not all(converged(node.run, t, guard) for t in tables)
        except CommandError:
            return True

    def apply(self, node: Node) -> None:
        guard = self._guard(node)
        tables = self._tables(node, guard)
        for family_tables in tables:
            try:
                converge(node.run, family_tables, guard)
            except RuntimeError as error:  # CommandError included: iptables refused a rule
                raise StepFailed(
                    "the firewall rules that keep the instance metadata service for root only ({}): {}. Fix: check "
                    "`{} -S` on the node; another firewall manager may rewrite OUTPUT".format(
                        family_tables.family, error, family_tables.iptables
                    )
                ) from None
        if guard.targets:
            self._persist(node, guard, tables)
        else:
            self._remove(node)

    def _persist(self, node: Node, guard: Guard, tables: List[Tables]) -> None:
        unit_changed = False
        for path, content, mode in self._files(node, guard, tables):
            changed = write_file(node, path, content, mode=mode)
            unit_changed = unit_changed or (changed and path == UNIT_FILE)
        if node.has_systemd:
            if unit_changed:
                node.run(["systemctl", "daemon-reload"], timeout=120)
            node.run(["systemctl", "enable", UNIT], timeout=120)
        else:
            services.set_boot_command(node, UNIT, [PROGRAM])

    def _remove(self, node: Node) -> None:
        if node.has_systemd and node.path(UNIT_FILE).exists():
            node.run(["systemctl", "disable", UNIT], check=False, timeout=120)
            node.path(UNIT_FILE).unlink()
            node.run(["systemctl", "daemon-reload"], timeout=120)
        if not node.has_systemd:
            services.set_boot_command(node, UNIT, None)
        for path in (CONFIG_PATH, PROGRAM):
            if node.path(path).exists():
                node.path(path).unlink()

    def describe(self, node: Node) -> List[str]:
        try:
            guard = self._guard(node)
        except StepFailed as error:
            return ["fail: {}".format(error)]
        if not guard.targets:
            return ["remove the rules that keep the instance metadata service for root only"]
        allowed = ["root"] + ["group " + g for g in node.options.security.imds_groups]
        addresses = ", ".join(t.address + (":{}".format(t.port) if t.port else "") for t in guard.targets)
        boot = "systemctl enable " + UNIT if node.has_systemd else "record " + PROGRAM + " in " + services.BOOT_COMMANDS
        lines = [
            "iptables-restore --noflush: chain {} lets {} reach {}; everyone else is rejected".format(
                CHAIN, ", ".join(allowed), addresses
            ),
            "write {} and {}; {}".format(CONFIG_PATH, PROGRAM, boot),
        ]
        try:
            self._tables(node, guard)
        except StepFailed:
            lines.append("needs iptables, not on this node yet (the generic platform's packages step installs it)")
        return lines


def imds_steps(node: Node) -> List[Step]:
    """The guard on every node (it also removes old rules when ``imds_root_only`` is off)."""
    return [ImdsGuard()]
