"""The metadata service for root only on a fake root: the rules ``imds_guard`` builds, the ``imds-guard`` step (which
addresses, which groups, the guard file, the boot unit or record, removal) and the ``runtime.security`` options.

The kernel's side (root answered, others refused, allowed groups through) is proved with the real iptables in
tests/test_local_imds_guard.py and on a local cluster in tests/test_local_imds.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from runtime_fakes import FakeHost, RecordingRunner, fake_node, touch
from training_runtime.emulation import Emulation
from training_runtime.errors import StepFailed
from training_runtime.imds_guard import (
    CHAIN,
    CONFIG_PATH,
    IPV4,
    IPV6,
    Found,
    Guard,
    Target,
    chain_rules,
    guard_from_json,
    restore_input,
)
from training_runtime.node import Node
from training_runtime.options import options_problems, parse_options
from training_runtime.run import Result
from training_runtime.services import BOOT_COMMANDS, boot_commands
from training_runtime.steps.catalog import packages_for, steps_for
from training_runtime.steps.imds import PROGRAM, UNIT, UNIT_FILE, ImdsGuard, boot_unit, metadata_targets

EC2 = Target(IPV4, "169.254.169.254")
EC2_V6 = Target(IPV6, "fd00:ec2::254")
OUTPUT_POLICY = "-P OUTPUT ACCEPT"


# --- the rules, pure ------------------------------------------------------------------------------------------------


def test_the_chain_lets_root_then_each_allowed_group_through_and_rejects_everyone_else() -> None:
    assert chain_rules(()) == [["-m", "owner", "--uid-owner", "0", "-j", "RETURN"], ["-j", "REJECT"]]
    rules = chain_rules((2001, 3000))
    assert rules[1:3] == [
        ["-m", "owner", "--gid-owner", "2001", "--suppl-groups", "-j", "RETURN"],
        ["-m", "owner", "--gid-owner", "3000", "--suppl-groups", "-j", "RETURN"],
    ]
    assert rules[-1] == ["-j", "REJECT"], "REJECT last: a rule after it would never be reached"


def test_each_address_gets_a_tcp_jump_to_the_chain() -> None:
    assert EC2.jump() == ["-d", "169.254.169.254/32", "-p", "tcp", "-j", CHAIN]
    assert EC2_V6.jump() == ["-d", "fd00:ec2::254/128", "-p", "tcp", "-j", CHAIN]
    fake = Target(IPV4, "10.250.0.2", 8111)
    assert fake.jump() == ["-d", "10.250.0.2/32", "-p", "tcp", "-m", "tcp", "--dport", "8111", "-j", CHAIN]


def test_one_restore_rewrites_the_chain_and_moves_the_jumps_to_the_top() -> None:
    guard = Guard((EC2, Target(IPV4, "10.250.0.2", 8111)), (2001,))
    fresh = restore_input(guard, IPV4, Found(jumps=(), chain=None))
    assert fresh is not None
    lines = fresh.splitlines()
    assert lines[0] == "*filter" and lines[-1] == "COMMIT"
    assert lines[1] == f":{CHAIN} - [0:0]", "declaring the chain creates it, or flushes it under --noflush"
    assert lines[2:5] == [f"-A {CHAIN} {' '.join(r)}" for r in chain_rules((2001,))]
    # inserted at 1 in reverse: EC2's jump ends first, the fake's second
    assert lines[5:7] == [f"-I OUTPUT 1 {' '.join(guard.targets[1].jump())}", f"-I OUTPUT 1 {' '.join(EC2.jump())}"]
    moved = restore_input(guard, IPV4, Found(jumps=(2, 5), chain=("-A x",)))
    assert moved is not None
    assert [line for line in moved.splitlines() if line.startswith("-D")] == ["-D OUTPUT 5", "-D OUTPUT 2"]
    assert restore_input(guard, IPV6, Found((), None)) is None, "no IPv6 target and nothing there: no restore"


def test_with_no_target_the_restore_removes_our_jumps_and_chain_or_is_not_needed() -> None:
    off = Guard(())
    assert restore_input(off, IPV4, Found((), None)) is None
    text = restore_input(off, IPV4, Found((1,), ("-A rule",)))
    assert text == f"*filter\n-D OUTPUT 1\n-F {CHAIN}\n-X {CHAIN}\nCOMMIT\n"


def test_the_guard_file_round_trips_and_a_bad_one_is_named() -> None:
    guard = Guard((EC2, EC2_V6), (7,))
    tables = [FakeIptables.tables(IPV4)]
    assert guard_from_json(json.loads(json.dumps(guard.to_json(tables)))) == (guard, tables)
    with pytest.raises(RuntimeError, match="not a guard"):
        guard_from_json({"targets": []})
    with pytest.raises(RuntimeError, match="unknown address family ipx"):
        guard_from_json(
            {"targets": [{"family": "ipx", "address": "a", "port": None}], "allowed_gids": [], "tables": []}
        )


# --- a stand-in for iptables ------------------------------------------------------------------------------------------


class FakeIptables(RecordingRunner):
    """iptables and iptables-restore as far as the guard uses them, per family: ``-S``, ``-C``, and the restore
    input of :func:`restore_input`; rules are kept as the words given. Other commands are recorded only."""

    PROGRAMS = {
        IPV4: ("/usr/sbin/iptables", "/usr/sbin/iptables-restore"),
        IPV6: ("/usr/sbin/ip6tables", "/usr/sbin/ip6tables-restore"),
    }

    def __init__(self) -> None:
        super().__init__()
        self.rules: dict[str, dict[str, list[str]]] = {IPV4: {"OUTPUT": []}, IPV6: {"OUTPUT": []}}
        self.restores: list[str] = []

    @classmethod
    def tables(cls, family: str) -> Any:
        from training_runtime.imds_guard import Tables

        return Tables(family, *cls.PROGRAMS[family])

    def run(self, argv: Any, *, check: bool = True, input: str | None = None, **options: Any) -> Result:
        argv = list(argv)
        family = next((f for f, programs in self.PROGRAMS.items() if argv and argv[0] in programs), None)
        if family is None:
            return super().run(argv, check=check, input=input, **options)
        self.commands.append(argv)
        chains = self.rules[family]
        if argv[0].endswith("-restore"):
            assert argv[1:] == ["-w", "--noflush"] and input is not None
            self.restores.append(input)
            for line in input.splitlines():
                words = line.split()
                if line.startswith(":"):
                    chains[line[1:].split()[0]] = []
                elif words[0] == "-A":
                    chains[words[1]].append(" ".join(words[2:]))
                elif words[0] == "-D":
                    del chains[words[1]][int(words[2]) - 1]
                elif words[0] == "-I":
                    chains[words[1]].insert(int(words[2]) - 1, " ".join(words[3:]))
                elif words[0] == "-X":
                    del chains[words[1]]
            return Result(argv, 0, "", "")
        assert argv[1] == "-w"
        if argv[2:] == ["-S"]:  # the whole filter table, as iptables lists it: policies, chains, then rules
            listing = ["-P INPUT ACCEPT", "-P FORWARD ACCEPT", OUTPUT_POLICY]
            listing += [f"-N {name}" for name in chains if name != "OUTPUT"]
            listing += [f"-A {name} {rule}" for name, rules in chains.items() for rule in rules]
            return Result(argv, 0, "\n".join(listing) + "\n", "")
        if argv[2] == "-C":
            present = " ".join(argv[4:]) in chains.get(argv[3], [])
            return Result(argv, 0, "", "") if present else self._fail(argv, check, "Bad rule")
        raise AssertionError(f"unexpected iptables command {argv}")

    def _fail(self, argv: list[str], check: bool, message: str) -> Result:
        assert not check, argv
        return Result(argv, 1, "", message)


def guarded_node(tmp_path: Path, *, systemd: bool = False, ipv6: bool = False, **kwargs: Any) -> Node:
    runner = FakeIptables()
    node = fake_node(tmp_path, runner=runner, **kwargs)
    for programs in FakeIptables.PROGRAMS.values():
        for program in programs:
            touch(tmp_path, program).chmod(0o755)
    if systemd:
        (tmp_path / "run/systemd/system").mkdir(parents=True)
    if ipv6:
        touch(tmp_path, "/proc/net/if_inet6", "00000000000000000000000000000001 01 80 10 80       lo\n")
    return node


def rules(node: Node, family: str = IPV4) -> dict[str, list[str]]:
    runner = node.runner
    assert isinstance(runner, FakeIptables)
    return runner.rules[family]


# --- the step -------------------------------------------------------------------------------------------------------


def test_every_node_runs_the_guard_and_the_generic_platform_installs_iptables(tmp_path: Path) -> None:
    for instance in ("controller-1", "login-1", "workers-1"):
        node = fake_node(tmp_path / instance, instance=instance)
        plan = [s.name for s in steps_for(node)]
        assert "imds-guard" in plan, instance
        assert "iptables" in packages_for(node), instance
        assert plan.index("packages:slurm") < plan.index("imds-guard"), "iptables is installed before it is used"
    off = fake_node(tmp_path / "off", options={"security": {"imds_root_only": False}})
    assert "iptables" not in packages_for(off)


def test_a_worker_gets_the_rules_the_guard_file_and_a_boot_record_and_a_rerun_changes_nothing(tmp_path: Path) -> None:
    node = guarded_node(tmp_path)
    step = ImdsGuard()
    assert step.needed(node)
    step.apply(node)
    assert rules(node)["OUTPUT"] == [" ".join(EC2.jump())]
    assert rules(node)[CHAIN] == [" ".join(r) for r in chain_rules(())]
    assert rules(node, IPV6) == {"OUTPUT": []}, "no IPv6 in this kernel: no IPv6 rule"
    saved = json.loads((tmp_path / CONFIG_PATH.lstrip("/")).read_text())
    assert guard_from_json(saved)[0] == Guard((EC2,), ())
    assert (tmp_path / PROGRAM.lstrip("/")).read_text().splitlines()[-1].startswith("PYTHONPATH=/opt/hyperpod-cdk/lib")
    assert "-m training_runtime.imds_guard --apply " + CONFIG_PATH in (tmp_path / PROGRAM.lstrip("/")).read_text()
    assert boot_commands((tmp_path / BOOT_COMMANDS.lstrip("/")).read_text()) == [(UNIT, (PROGRAM,))]
    assert not step.needed(node), "converged"
    runner = node.runner
    assert isinstance(runner, FakeIptables)
    restores = len(runner.restores)
    step.apply(node)
    assert len(runner.restores) == restores, "a second bootstrap rewrites nothing"


def test_with_systemd_a_oneshot_unit_before_the_network_puts_the_rules_back_at_boot(tmp_path: Path) -> None:
    node = guarded_node(tmp_path, systemd=True, instance="controller-1")
    ImdsGuard().apply(node)
    unit = (tmp_path / UNIT_FILE.lstrip("/")).read_text()
    assert unit == boot_unit()
    assert "Type=oneshot" in unit and "ExecStart=" + PROGRAM in unit
    assert "Before=network-pre.target" in unit and "DefaultDependencies=no" in unit
    runner = node.runner
    assert isinstance(runner, FakeIptables)
    assert runner.ran("systemctl", "daemon-reload") and runner.ran("systemctl", "enable", UNIT)
    assert not (tmp_path / BOOT_COMMANDS.lstrip("/")).exists()
    assert not ImdsGuard().needed(node)
    runner.respond[("systemctl", "is-enabled")] = (1, "")
    assert ImdsGuard().needed(node), "a disabled unit would not come back after a reboot"


def test_allowed_groups_are_let_through_by_gid_and_a_missing_group_fails_naming_it(tmp_path: Path) -> None:
    options = {"security": {"imds_groups": ["pipeline", "ops"]}}
    host = FakeHost("workers-1", {"pipeline": (3001, 3001), "ops": (0, 2500)})
    node = guarded_node(tmp_path, options=options, host=host)
    ImdsGuard().apply(node)
    assert rules(node)[CHAIN] == [" ".join(r) for r in chain_rules((2500, 3001))]
    missing = guarded_node(tmp_path / "m", options={"security": {"imds_groups": ["nobody-has-this"]}})
    assert ImdsGuard().needed(missing)
    with pytest.raises(StepFailed, match=r"imds_groups names group 'nobody-has-this'.*Fix: create the group"):
        ImdsGuard().apply(missing)
    assert rules(missing) == {"OUTPUT": []}, "nothing half-done"


def test_ipv6_gets_its_rule_where_the_kernel_has_ipv6_and_a_missing_ip6tables_is_a_clear_failure(
    tmp_path: Path,
) -> None:
    node = guarded_node(tmp_path, ipv6=True)
    assert metadata_targets(node) == (EC2, EC2_V6)
    ImdsGuard().apply(node)
    assert rules(node, IPV6)["OUTPUT"] == [" ".join(EC2_V6.jump())]
    (tmp_path / "usr/sbin/ip6tables-restore").unlink()
    with pytest.raises(StepFailed, match=r"this node lacks ip6tables-restore.*Fix: install the iptables package"):
        ImdsGuard().apply(node)


def test_the_local_clusters_fake_metadata_service_is_guarded_on_its_port(tmp_path: Path) -> None:
    node = guarded_node(tmp_path, emulation=Emulation(imds_url="http://10.250.0.2:8111"))
    assert metadata_targets(node) == (EC2, Target(IPV4, "10.250.0.2", 8111))


def test_a_node_without_iptables_fails_with_a_fix_unless_the_guard_is_off(tmp_path: Path) -> None:
    node = fake_node(tmp_path)
    assert ImdsGuard().needed(node)
    with pytest.raises(StepFailed, match=r"this node lacks iptables and iptables-restore.*imds_root_only: false"):
        ImdsGuard().apply(node)
    off = fake_node(tmp_path / "off", options={"security": {"imds_root_only": False}})
    assert not ImdsGuard().needed(off)


def test_turning_the_guard_off_removes_the_rules_the_files_and_the_boot_entry(tmp_path: Path) -> None:
    on = guarded_node(tmp_path, systemd=True)
    ImdsGuard().apply(on)
    off = fake_node(tmp_path, runner=on.runner, options={"security": {"imds_root_only": False}})
    assert ImdsGuard().needed(off)
    assert ImdsGuard().describe(off) == ["remove the rules that keep the instance metadata service for root only"]
    ImdsGuard().apply(off)
    assert rules(off) == {"OUTPUT": []}
    assert not any((tmp_path / p.lstrip("/")).exists() for p in (CONFIG_PATH, PROGRAM, UNIT_FILE))
    runner = off.runner
    assert isinstance(runner, FakeIptables)
    assert runner.ran("systemctl", "disable", UNIT)
    assert not ImdsGuard().needed(off)


def test_without_systemd_turning_it_off_drops_the_boot_record(tmp_path: Path) -> None:
    on = guarded_node(tmp_path)
    ImdsGuard().apply(on)
    off = fake_node(tmp_path, runner=on.runner, options={"security": {"imds_root_only": False}})
    ImdsGuard().apply(off)
    assert boot_commands((tmp_path / BOOT_COMMANDS.lstrip("/")).read_text()) == []
    assert not ImdsGuard().needed(off)


def test_the_plan_says_who_is_let_through_where(tmp_path: Path) -> None:
    host = FakeHost("workers-1", {"pipeline": (3001, 3001)})
    node = guarded_node(tmp_path, options={"security": {"imds_groups": ["pipeline"]}}, host=host)
    lines = ImdsGuard().describe(node)
    assert "lets root, group pipeline reach 169.254.169.254; everyone else is rejected" in lines[0]
    assert lines[1].endswith(f"record {PROGRAM} in {BOOT_COMMANDS}")


def test_the_runners_argv_never_passes_through_a_shell(tmp_path: Path) -> None:
    """Every command is an argument list: group names and addresses reach iptables as words of their own, and the
    rules themselves travel on iptables-restore's standard input."""
    node = guarded_node(tmp_path)
    ImdsGuard().apply(node)
    runner = node.runner
    assert isinstance(runner, FakeIptables)
    assert all(argv[0] not in ("sh", "/bin/sh", "bash") for argv in runner.commands)
    assert all(shlex.split(shlex.join(argv)) == argv for argv in runner.commands)


# --- the options ----------------------------------------------------------------------------------------------------


def test_the_metadata_service_is_root_only_by_default() -> None:
    security = parse_options({}).security
    assert security.imds_root_only is True and security.imds_groups == ()


@pytest.mark.parametrize(
    ("security", "words"),
    [
        ({"imds_root_only": False, "imds_groups": ["ops"]}, "applies only with imds_root_only: true"),
        ({"imds_groups": ["-rf"]}, "options.security.imds_groups[0]: got '-rf'; expected a Unix group name"),
        ({"imds_groups": ["a b"]}, "expected a Unix group name"),
        ({"imds_groups": ["ops\n"]}, "expected a Unix group name"),
        ({"imds_groups": ["ops", "ops"]}, "options.security.imds_groups[1]: got 'ops'; names a group twice"),
        ({"imds_groups": "ops"}, "options.security.imds_groups: got 'ops'; expected a list of strings"),
        ({"imds": True}, "options.security.imds: unknown option; allowed: imds_root_only, imds_groups"),
    ],
)
def test_bad_security_options_are_refused_before_deploy(security: dict[str, Any], words: str) -> None:
    problems = [str(p) for p in options_problems({"security": security})]
    assert any(words in p for p in problems), problems


def test_a_directory_service_group_name_is_accepted() -> None:
    assert options_problems({"security": {"imds_groups": ["hpc-users@example.com", "ml_ops", "team.a"]}}) == []
