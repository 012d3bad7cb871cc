"""The emulated nodes' enabled services: what a booted node starts without its lifecycle script.

A real node starts at boot the systemd units its image and its lifecycle script enabled; HyperPod does not
re-run the script after a reboot (docs/local-cluster.md, "Reboot and replace"). The emulated nodes have no
systemd, so the runtime records each daemon it starts in :data:`training_runtime.services.ENABLED_DAEMONS`
(:func:`training_runtime.services.enable`), and :meth:`LocalCluster.boot` calls :func:`start` to start them
again, first enabled first, each unless it already runs (HyperPod's part, run before, may have started it).
Before them it runs the one-shot commands the runtime enabled (:data:`training_runtime.services.BOOT_COMMANDS`,
systemd's ``Type=oneshot`` units: the metadata service's firewall rules, which a new network namespace lacks).
"""

from __future__ import annotations

import shlex

from hyperpod_local.state import ClusterHandle, LocalClusterError
from training_runtime.services import BOOT_COMMANDS, ENABLED_DAEMONS, Daemon, boot_commands, enabled_daemons

START_TIMEOUT_S = 30
"""How long each daemon has to write its pid file (systemd's default start timeout is 90 s)."""


def boot_script(daemons: list[Daemon]) -> str:
    """The shell script that starts ``daemons`` in order on a node (as root) and waits for each one's pid file."""
    lines = [
        "set -eu",
        'running() { [ -s "$1" ] && [ "$(cat /proc/$(cat "$1")/comm 2>/dev/null)" = "$2" ]; }',
    ]
    for daemon in daemons:
        pid_file, comm = shlex.quote(daemon.pid_file), shlex.quote(daemon.name[:15])
        if daemon.run_dir:
            path, owner, mode = daemon.run_dir
            lines.append(f"install -d -o {shlex.quote(owner)} -g {shlex.quote(owner)} -m {mode:o} {shlex.quote(path)}")
        lines += [
            f"running {pid_file} {comm} || {shlex.join(daemon.argv)}",
            f"i=0; until running {pid_file} {comm}; do i=$((i + 1)); "
            f'if [ "$i" -gt {START_TIMEOUT_S * 10} ]; then echo "{daemon.unit} did not start" >&2; exit 1; fi; '
            "sleep 0.1; done",
            f"echo {shlex.quote(daemon.unit)}",
        ]
    return "\n".join(lines) + "\n"


def run_boot_commands(cluster: ClusterHandle, name: str) -> list[str]:
    """Run the one-shot commands node ``name`` has enabled, in order (as root); their units. LocalClusterError
    naming the node and the command that failed."""
    found = cluster.exec(name, ["cat", BOOT_COMMANDS], timeout=30)
    try:
        commands = boot_commands(found.stdout if found.returncode == 0 else None)
    except ValueError as error:
        raise LocalClusterError(f"node {name}: {error}") from None
    for unit, argv in commands:
        result = cluster.exec(name, list(argv), timeout=START_TIMEOUT_S)
        if result.returncode != 0:
            raise LocalClusterError(
                f"node {name}: {unit} ({shlex.join(argv)}) failed at boot: {(result.stderr or result.stdout).strip()}"
            )
    return [unit for unit, _ in commands]


def start(cluster: ClusterHandle, name: str) -> list[str]:
    """Run node ``name``'s boot commands, then start the daemons it has enabled (none when its lifecycle script never
    ran); the units run, started or found running, in order. LocalClusterError naming the node and the command or
    daemon that did not start."""
    ran = run_boot_commands(cluster, name)
    found = cluster.exec(name, ["cat", ENABLED_DAEMONS], timeout=30)
    try:
        daemons = enabled_daemons(found.stdout if found.returncode == 0 else None)
    except ValueError as error:
        raise LocalClusterError(f"node {name}: {error}") from None
    if not daemons:
        return ran
    result = cluster.exec(name, ["/bin/sh", "-c", boot_script(daemons)], timeout=START_TIMEOUT_S * len(daemons) + 30)
    if result.returncode != 0:
        raise LocalClusterError(
            f"node {name}: starting its enabled daemons at boot failed: {(result.stderr or result.stdout).strip()}"
        )
    return ran + result.stdout.split()
