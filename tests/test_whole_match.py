"""Values are checked in full: a trailing newline never passes a `^...$` pattern (``re.match`` with ``$`` lets one
through), mount paths stay out of the system's directories on both halves (one list), and a value written into
Lua or fstab cannot split its line. Issue #39, review finding L1."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from hyperpod_cdk.core.config import parse_config
from hyperpod_cdk.core.errors import ConfigurationError
from training_runtime import mount_paths
from training_runtime.errors import StepFailed
from training_runtime.groups import GroupSpec
from training_runtime.params import LIFECYCLE_DRIVEN, ParametersError, ProvisioningParameters
from training_runtime.scaler.job_submit import _lua_string, render_script
from training_runtime.steps.storage import fstab_line
from training_runtime.users import parse_users

ROOT = Path(__file__).resolve().parent.parent
USERS = [{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2002}]


def refused(config: dict[str, Any], rule: str, path: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_config(config)
    assert any(getattr(p, "rule", "") == rule and p.path == path for p in raised.value.problems), [
        f"{p} [{getattr(p, 'rule', '')}]" for p in raised.value.problems
    ]


@pytest.mark.parametrize(
    ("config", "rule", "path"),
    [
        ({"users": [{"name": "researcher\n", "uid": 2001}]}, "USR-NAME", "users[0].name"),
        (
            {"users": [{"name": "alice", "uid": 2001, "ssh_public_keys": ["ssh-ed25519 AAAAC3Nz alice@laptop\n"]}]},
            "USR-SSH-KEY",
            "users[0].ssh_public_keys",
        ),
        ({"fsx_mount_path": "/fsx\n"}, "CL-MOUNT-PATH", "fsx_mount_path"),
        (
            {
                "runtime": {"accounting": {"enabled": True}},
                "users": USERS,
                "teams": [{"name": "v\n", "users": ["alice"]}],
            },
            "TEAM-NAME",
            "teams[0].name",
        ),
        (
            {"runtime": {"accounting": {"enabled": True, "user": "slurm\n"}}},
            "RT-ACCOUNTING-USER",
            "runtime.accounting.user",
        ),
        ({"cluster_name": "train\n"}, "CL-NAME", "cluster_name"),
    ],
    ids=["user-name", "ssh-key", "fsx-mount-path", "team-name", "runtime-option-pattern", "cluster-name"],
)
def test_a_trailing_newline_is_refused(config: dict[str, Any], rule: str, path: str) -> None:
    refused(config, rule, path)


def test_the_node_refuses_a_user_name_with_a_trailing_newline() -> None:
    from training_runtime.users import UsersError

    with pytest.raises(UsersError, match=re.escape("users[0].name: got 'researcher\\n'")):
        parse_users([{"name": "researcher\n", "uid": 2001}])


@pytest.mark.parametrize(
    "path", ["/bin", "/sbin/x", "/lib", "/lib64", "/boot", "/root", "/tmp", "/tmp/fsx", "/run/x", "/opt", "/snap"]
)
def test_system_directories_and_their_parents_are_no_mount_path(path: str) -> None:
    refused({"fsx_mount_path": path}, "CL-MOUNT-PATH", "fsx_mount_path")


@pytest.mark.parametrize("path", ["/fsx", "/mnt/data", "/lustre", "/shared/fsx", "/srv/fsx", "/optional"])
def test_ordinary_mount_paths_pass(path: str) -> None:
    assert parse_config({"fsx_mount_path": path}).fsx_mount_path == path


def test_reserved_mount_paths_cover_the_system_directories() -> None:
    for directory in ("/bin", "/sbin", "/lib", "/lib64", "/boot", "/root", "/tmp", "/run", "/usr", "/etc", "/var"):
        assert directory in mount_paths.RESERVED_MOUNT_PATHS
    for directory in ("/proc", "/sys", "/dev", "/opt/slurm", "/opt/ml", "/opt/sagemaker", "/opt/hyperpod-cdk"):
        assert directory in mount_paths.RESERVED_MOUNT_PATHS
    assert mount_paths.reserved_by("/home") is None, "OpenZFS puts the homes at /home"


def _parameters(**ours: object) -> dict[str, Any]:
    written = ProvisioningParameters(
        cluster_name="c1",
        mode=LIFECYCLE_DRIVEN,
        groups=(GroupSpec("controller", "controller", "ml.m5.xlarge"), GroupSpec("cpu", "compute", "ml.c5.4xlarge")),
    ).to_json()
    written["hyperpod_cdk"].update(ours)
    return written


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("fsx_mount_path", "/bin"),
        ("fsx_mount_path", "/fsx\n"),
        ("fsx_mount_path", "/fsx data"),
        ("openzfs_mount_path", "/tmp"),
        ("openzfs_mount_path", "/home\n"),
    ],
)
def test_the_node_checks_mount_paths_again_with_the_same_list(key: str, value: str) -> None:
    with pytest.raises(ParametersError, match=re.escape(f"hyperpod_cdk.{key}: got {value!r}")):
        ProvisioningParameters.from_json(_parameters(**{key: value}))


def test_the_node_reads_ordinary_mount_paths() -> None:
    read = ProvisioningParameters.from_json(_parameters(fsx_mount_path="/lustre", openzfs_mount_path="/home"))
    assert (read.fsx_mount_path, read.openzfs_mount_path) == ("/lustre", "/home")
    assert dataclasses.replace(read).homes_dir == "/home"


@pytest.mark.parametrize(
    ("dns", "mount_name"),
    [("fs-0123.fsx.us-east-1.amazonaws.com /x", "abcdefgh"), ("fs-0123.fsx", "abc\n"), ("fs-0123.fsx", "a#b")],
)
def test_an_fstab_field_that_would_split_the_line_is_refused(dns: str, mount_name: str) -> None:
    with pytest.raises(StepFailed, match="a field of /etc/fstab"):
        fstab_line(dns, mount_name, "/fsx")


def test_lua_strings_escape_newlines_and_control_characters() -> None:
    assert _lua_string('a"b\\c') == '"a\\"b\\\\c"'
    assert _lua_string("gpu\nos.execute('x')") == "\"gpu\\010os.execute('x')\""
    assert _lua_string("t\x00\r\x7fé") == '"t\\000\\013\\127\\195\\169"'
    script = render_script([("train\nend os.exit(1) --", "gpu")])
    (line,) = [line for line in script.splitlines() if "train" in line]
    assert line == '  ["train\\010end os.exit(1) --"] = "gpu",'


def _anchored_patterns(files: list[Path]) -> set[str]:
    """Names bound at module level to ``re.compile("^...$")`` (no MULTILINE) anywhere in ``files``."""
    names: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and node.value.args):
                continue
            if getattr(node.value.func, "attr", "") != "compile":
                continue
            tail = _literal_tail(node.value.args[0])
            flags = ast.unparse(node.value.args[1]) if len(node.value.args) > 1 else ""
            if tail is not None and tail.endswith("$") and "MULTILINE" not in flags:
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _literal_tail(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[-1], ast.Constant):
        return str(node.values[-1].value)
    if isinstance(node, ast.BinOp):
        return _literal_tail(node.left if isinstance(node.op, ast.Mod) else node.right)
    return None


def test_no_dollar_anchored_pattern_is_used_with_match() -> None:
    """``PATTERN.match(text)`` with a pattern ending in ``$`` accepts ``text + "\\n"``: use ``fullmatch``. Only
    the emulator's drill, which parses its own log lines, is left out."""
    trees = [ROOT / "src", ROOT / "hyperpod-local" / "src"]
    files = [p for tree in trees for p in sorted(tree.rglob("*.py")) if p.name != "drill.py"]
    anchored = _anchored_patterns(files)
    assert {"USER_NAME", "NODE_NAME", "ACCOUNT_NAME", "MOUNT_PATH_PATTERN"} <= anchored
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "match"):
                continue
            receiver = node.func.value
            name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", None)
            tail = _literal_tail(node.args[0]) if name == "re" and node.args else None
            if name in anchored or (tail is not None and tail.endswith("$")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
