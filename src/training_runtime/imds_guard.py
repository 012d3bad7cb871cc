"""The instance metadata service for root only: owner-match firewall rules, built and converged (security review H1).

Every process on a node can otherwise read the instance role's credentials from the instance metadata service
(IMDS), so any job or login user could act as the node's role. AWS, EC2 User Guide, "Limit access to the Instance
Metadata Service" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instance-metadata-limiting-access.html):
"You can consider using local firewall rules to disable access from some or all processes to the Instance Metadata
Service (IMDS)", with the example ``sudo iptables --append OUTPUT --proto tcp --destination 169.254.169.254 --match
owner --uid-owner apache --jump REJECT``, and "Or, you can consider only allowing access to particular users or
groups, by using allow rules. ... You can also combine group usage with allow rules, so that you can add and remove
users from a permitted group without needing to change the firewall rule." The rules here are such allow rules, per
address family, in a chain of their own::

    OUTPUT:            -d <metadata address> -p tcp [-m tcp --dport <port>] -j HYPERPOD-CDK-IMDS   (first in OUTPUT)
    HYPERPOD-CDK-IMDS: -m owner --uid-owner 0 -j RETURN
                       -m owner --gid-owner <gid> --suppl-groups -j RETURN   (each allowed group)
                       -j REJECT

A rejected connection fails at once ("connection refused"), not after a timeout. ``--suppl-groups`` matches a
process whose supplementary groups hold the group, not only its primary one (iptables-extensions(8), owner).

:func:`converge` brings one family's rules to a :class:`Guard` with one ``iptables-restore --noflush`` (atomic: the
chain is never empty or half-written while the OUTPUT jump points to it), after reading the current state with
``iptables -S`` and ``-C``. The bootstrap step (``steps/imds.py``) calls it through the node's runner; at boot
(a reboot does not re-run the lifecycle script) ``python3 -m training_runtime.imds_guard --apply FILE`` calls it with
the guard the step wrote to :data:`CONFIG_PATH`. Runs on the node's system Python (3.8 and newer), stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from training_runtime.log import log
from training_runtime.run import CommandError, Result, Runner

CHAIN = "HYPERPOD-CDK-IMDS"
"""The chain that holds the owner rules (iptables limits chain names to 28 characters)."""
IPV4 = "ipv4"
IPV6 = "ipv6"
FAMILIES = (IPV4, IPV6)
CONFIG_PATH = "/etc/hyperpod-cdk/imds-guard.json"
"""The guard as the bootstrap last converged it (no secret: addresses, group IDs, the iptables programs)."""
TIMEOUT_S = 60.0

Run = Callable[..., Result]
"""``node.run`` or ``Runner().run``: an argv list, keyword options (``check``, ``timeout``, ``input``)."""


class GuardError(RuntimeError):
    """The guard's file is not what :meth:`Guard.to_json` writes."""


@dataclass(frozen=True)
class Target:
    """One metadata service address: every TCP port of it (EC2's), or one port (the local cluster's fake)."""

    family: str
    address: str
    port: Optional[int] = None

    def jump(self) -> List[str]:
        """The OUTPUT rule (without ``-A OUTPUT``) that sends this address's traffic through :data:`CHAIN`."""
        spec = ["-d", "{}/{}".format(self.address, 32 if self.family == IPV4 else 128), "-p", "tcp"]
        if self.port is not None:
            spec += ["-m", "tcp", "--dport", str(self.port)]
        return [*spec, "-j", CHAIN]


@dataclass(frozen=True)
class Tables:
    """One address family's programs on the node: ``iptables`` and ``iptables-restore`` (or the ``ip6`` ones)."""

    family: str
    iptables: str
    restore: str


@dataclass(frozen=True)
class Guard:
    """What the node's firewall must hold: the metadata addresses and the groups allowed besides root."""

    targets: Tuple[Target, ...]
    allowed_gids: Tuple[int, ...] = ()

    def targets_of(self, family: str) -> Tuple[Target, ...]:
        return tuple(t for t in self.targets if t.family == family)

    def to_json(self, tables: Sequence[Tables]) -> Dict[str, Any]:
        return {
            "targets": [{"family": t.family, "address": t.address, "port": t.port} for t in self.targets],
            "allowed_gids": list(self.allowed_gids),
            "tables": [{"family": t.family, "iptables": t.iptables, "restore": t.restore} for t in tables],
        }


def guard_from_json(data: Any) -> Tuple[Guard, List[Tables]]:
    """The guard and programs of :meth:`Guard.to_json`'s output; GuardError naming what is wrong."""
    try:
        targets = tuple(
            Target(str(t["family"]), str(t["address"]), None if t["port"] is None else int(t["port"]))
            for t in data["targets"]
        )
        gids = tuple(int(g) for g in data["allowed_gids"])
        tables = [Tables(str(t["family"]), str(t["iptables"]), str(t["restore"])) for t in data["tables"]]
    except (KeyError, TypeError, ValueError) as error:
        raise GuardError("not a guard ({}: {})".format(type(error).__name__, error)) from None
    unknown = sorted({t.family for t in targets} - set(FAMILIES))
    if unknown:
        raise GuardError("unknown address family {}; allowed: {}".format(", ".join(unknown), ", ".join(FAMILIES)))
    return Guard(targets, gids), tables


def chain_rules(allowed_gids: Sequence[int]) -> List[List[str]]:
    """The rules of :data:`CHAIN` in order (without ``-A CHAIN``): root, each allowed group, then REJECT."""
    rules = [["-m", "owner", "--uid-owner", "0", "-j", "RETURN"]]
    rules += [["-m", "owner", "--gid-owner", str(gid), "--suppl-groups", "-j", "RETURN"] for gid in allowed_gids]
    return [*rules, ["-j", "REJECT"]]


def _target_of(line: str) -> Optional[str]:
    """The ``-j`` target of one ``iptables -S`` line, or None."""
    words = line.split()
    return words[words.index("-j") + 1] if "-j" in words[:-1] else None


@dataclass(frozen=True)
class Found:
    """One family's rules as ``iptables -S`` lists them."""

    jumps: Tuple[int, ...]
    """Positions (from 1) of the OUTPUT rules that jump to :data:`CHAIN`."""
    chain: Optional[Tuple[str, ...]]
    """The chain's ``-A`` lines; None when there is no such chain."""


def found(run: Run, tables: Tables) -> Found:
    """Read one family's OUTPUT chain and :data:`CHAIN` from one listing of the filter table (``iptables -S``: a
    missing chain is no failed command); CommandError when the table cannot be listed."""
    lines = run([tables.iptables, "-w", "-S"], timeout=TIMEOUT_S).stdout.splitlines()
    rules = [line for line in lines if line.startswith("-A OUTPUT ")]
    jumps = tuple(index for index, line in enumerate(rules, 1) if _target_of(line) == CHAIN)
    chain = None
    if "-N {}".format(CHAIN) in (line.strip() for line in lines):
        chain = tuple(line for line in lines if line.startswith("-A {} ".format(CHAIN)))
    return Found(jumps, chain)


def converged(run: Run, tables: Tables, guard: Guard) -> bool:
    """Whether one family's rules are the guard's: its jumps first in OUTPUT and no other, the chain's rules exactly
    :func:`chain_rules` with REJECT last (checked with ``iptables -C``, which compares rules as the kernel holds them,
    whatever the version prints); with no target in this family: no jump and no chain."""
    state = found(run, tables)
    targets = guard.targets_of(tables.family)
    if not targets:
        return state.jumps == () and state.chain is None
    if state.jumps != tuple(range(1, len(targets) + 1)) or state.chain is None:
        return False
    wanted = chain_rules(guard.allowed_gids)
    if len(state.chain) != len(wanted) or _target_of(state.chain[-1]) != "REJECT":
        return False
    checks = [["-C", CHAIN, *rule] for rule in wanted] + [["-C", "OUTPUT", *t.jump()] for t in targets]
    return all(run([tables.iptables, "-w", *check], check=False, timeout=TIMEOUT_S).ok for check in checks)


def restore_input(guard: Guard, family: str, state: Found) -> Optional[str]:
    """The ``iptables-restore --noflush`` input that turns ``state`` into the guard's rules for ``family`` in one
    commit (None: nothing to do). Declaring an existing chain flushes it under ``--noflush``; OUTPUT's old jumps
    are deleted by position, last first, and the guard's inserted at the top in order. Pure."""
    targets = guard.targets_of(family)
    lines = ["*filter"]
    if targets:
        lines.append(":{} - [0:0]".format(CHAIN))
        lines += ["-A {} {}".format(CHAIN, " ".join(rule)) for rule in chain_rules(guard.allowed_gids)]
    lines += ["-D OUTPUT {}".format(position) for position in sorted(state.jumps, reverse=True)]
    lines += ["-I OUTPUT 1 {}".format(" ".join(t.jump())) for t in reversed(targets)]
    if not targets:
        if state.chain is None and not state.jumps:
            return None
        if state.chain is not None:
            lines += ["-F {}".format(CHAIN), "-X {}".format(CHAIN)]
    return "\n".join([*lines, "COMMIT"]) + "\n"


def converge(run: Run, tables: Tables, guard: Guard) -> bool:
    """Bring one family's rules to the guard's (see :func:`restore_input`); True when anything changed. Raises
    CommandError when iptables fails, or RuntimeError when the rules still differ afterwards."""
    if converged(run, tables, guard):
        return False
    payload = restore_input(guard, tables.family, found(run, tables))
    if payload is not None:
        run([tables.restore, "-w", "--noflush"], input=payload, timeout=TIMEOUT_S)
    if not converged(run, tables, guard):
        raise RuntimeError("{}: the rules for the metadata service still differ after iptables-restore".format(CHAIN))
    return True


def apply_file(path: str, run: Run) -> List[str]:
    """Converge every family the guard file names (the boot program); the families changed."""
    try:
        with open(path) as handle:
            guard, tables = guard_from_json(json.load(handle))
    except (OSError, ValueError) as error:
        raise GuardError("{}: {}".format(path, error)) from None
    return [t.family for t in tables if converge(run, t, guard)]


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m training_runtime.imds_guard", description=__doc__.split("\n")[0])
    parser.add_argument("--apply", metavar="FILE", default=CONFIG_PATH, help="the guard to put in place")
    args = parser.parse_args(list(argv))
    os.environ.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    try:
        changed = apply_file(args.apply, Runner().run)
    except (GuardError, CommandError, RuntimeError) as error:
        sys.stderr.write("hyperpod-cdk imds guard: {}\n".format(error))
        log("imds_guard_failed", error=str(error))
        return 1
    log("imds_guard", file=args.apply, changed=changed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
