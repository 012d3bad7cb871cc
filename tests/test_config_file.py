"""A hostile config file is refused fast, with a short report: size, node count (aliases expanded) and depth are
bounded (hyperpod_cdk.core.config_file), and every value a problem shows is cut (training_runtime.problems).

No timing assertion: each test bounds what a hang would grow instead (output length, memory, the parser never
running), and runs the CLI under a generous timeout only so that a regression fails instead of hanging."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest

from hyperpod_cdk.core import config_file
from hyperpod_cdk.core.config import MAX_SHAPE_PROBLEMS, load_config, load_file
from hyperpod_cdk.core.config_file import MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, MAX_CONFIG_NODES
from hyperpod_cdk.core.errors import ConfigurationError
from hyperpod_cdk.validate import validate_command
from training_runtime.problems import SHOWN_CHARS, Problem

ROOT = Path(__file__).resolve().parent.parent
MEMORY_LIMIT = 2 * 1024**3
"""Address space for the CLI under test: the unbounded loader needed 5.8 GB for the 10-level file."""


def laughs(levels: int) -> str:
    """The "billion laughs" file: each level a list of nine aliases of the level below (9**levels strings)."""
    lines = ["a0: &a0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "hyperpod_cdk.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=_limit_memory,
    )


def test_billion_laughs_is_refused_with_a_short_report_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text(laughs(10))
    assert len(path.read_bytes()) < 2000
    result = run_cli("validate", str(path))
    assert result.returncode == 1, result.stderr[-2000:]
    assert len(result.stdout) + len(result.stderr) < 1000
    assert f"more than {MAX_CONFIG_NODES:,} YAML nodes (an alias counts as every node it names)" in result.stderr
    assert "[CFG-FILE]" in result.stderr
    assert "Traceback" not in result.stderr


def test_synth_refuses_billion_laughs_through_the_same_loader(tmp_path: Path) -> None:
    """app.py reads the config with load_config, so synth stops with one short error, exit 1."""
    path = tmp_path / "laughs.yaml"
    path.write_text(laughs(10))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        "CDK_CONTEXT_JSON": json.dumps({"config": str(path)}),
        "CDK_OUTDIR": str(tmp_path / "cdk.out"),
    }
    result = subprocess.run(
        [sys.executable, str(ROOT / "app.py")], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 1
    assert "YAML nodes" in result.stderr and len(result.stderr) < 1000, result.stderr[-2000:]


def test_aliases_count_as_every_node_they_name(tmp_path: Path) -> None:
    """Four levels (about 75,000 nodes in all) stay below the bound; five (about 670,000) pass it, from a
    400-byte file."""
    path = tmp_path / "c.yaml"
    path.write_text(laughs(4))
    assert set(load_file(path)) == {"a0", "a1", "a2", "a3", "a4"}
    path.write_text(laughs(5))
    with pytest.raises(ConfigurationError, match="YAML nodes"):
        load_file(path)


def test_a_file_over_the_size_bound_is_refused_before_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as stream:
        stream.truncate(50 * 1024 * 1024)  # sparse: 50 MB that take no disk

    def never(*args: object) -> None:
        raise AssertionError("the parser ran on a file over the size bound")

    monkeypatch.setattr(config_file._BoundedLoader, "__init__", never)
    with pytest.raises(ConfigurationError, match=f"larger than {MAX_CONFIG_BYTES:,} bytes"):
        load_file(path)


def test_a_file_at_the_size_bound_is_read(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    head = "cluster_name: big\n# "
    path.write_text(head + "x" * (MAX_CONFIG_BYTES - len(head) - 1) + "\n")
    assert len(path.read_bytes()) == MAX_CONFIG_BYTES
    assert load_file(path) == {"cluster_name": "big"}


@pytest.mark.parametrize("text", ["[" * 100_000, "{a: " * 20_000], ids=["lists", "mappings"])
def test_deep_nesting_is_a_clear_error_with_the_documented_exit_status(tmp_path: Path, text: str) -> None:
    """`validate` exits 1 on a config it refuses (`--help`; docs/rules.md "Levels"), never a RecursionError."""
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    out, err = StringIO(), StringIO()
    assert validate_command(str(path), out=out, err=err) == 1
    assert f"nested more than {MAX_CONFIG_DEPTH} levels deep" in err.getvalue()
    assert len(err.getvalue()) < 1000


def test_nesting_at_the_depth_bound_is_read(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("a: " + "[" * (MAX_CONFIG_DEPTH - 1) + "]" * (MAX_CONFIG_DEPTH - 1) + "\n")
    assert "a" in load_file(path)
    path.write_text("a: " + "[" * MAX_CONFIG_DEPTH + "]" * MAX_CONFIG_DEPTH + "\n")
    with pytest.raises(ConfigurationError, match="nested more than"):
        load_file(path)


def test_anchors_aliases_and_merge_keys_keep_working(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "cluster_name: anchors\n"
        "instance_groups:\n"
        "  - {name: controller, role: controller, instance_type: ml.c5.xlarge, count: 1}\n"
        "  - &gpu {name: gpu-a, role: compute, instance_type: ml.g5.xlarge, count: 2}\n"
        "  - <<: *gpu\n"
        "    name: gpu-b\n"
    )
    config = load_config(path)
    assert [(g.name, g.instance_type, g.count) for g in config.instance_groups[1:]] == [
        ("gpu-a", "ml.g5.xlarge", 2),
        ("gpu-b", "ml.g5.xlarge", 2),
    ]


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("users: &a [*a]\n")
    with pytest.raises(ConfigurationError, match=r"alias \*a refers to a node that contains it"):
        load_file(path)


def test_a_long_value_is_cut_in_the_report(tmp_path: Path) -> None:
    """Four levels of laughs pass the node bound; the unknown keys' values are shown cut, text and JSON."""
    path = tmp_path / "c.yaml"
    path.write_text(laughs(4))
    out, err = StringIO(), StringIO()
    assert validate_command(str(path), out=out, err=err) == 1
    assert "(cut)" in err.getvalue() and len(err.getvalue()) < 6 * (SHOWN_CHARS + 200)
    out = StringIO()
    assert validate_command(str(path), as_json=True, out=out, err=StringIO()) == 1
    assert len(out.getvalue()) < 12 * (SHOWN_CHARS + 200)
    shown = json.loads(out.getvalue())["problems"][-1]["got"]
    assert shown.endswith("(cut)")


def test_a_problem_shows_a_bounded_value() -> None:
    huge = Problem("users[0].name", "a POSIX user name", got="x" * 10_000_000)
    assert len(huge) < SHOWN_CHARS + 100 and str(huge).endswith("; a POSIX user name")
    assert len(huge.as_dict()["got"]) < SHOWN_CHARS + 20
    shared: list[object] = ["lol"] * 9
    for _ in range(12):  # 9**13 items if walked in full
        shared = [shared] * 9
    assert len(Problem("a", "b", got=shared)) < SHOWN_CHARS + 100
    small = Problem("a", "b", got=["x", 1, None])
    assert str(small) == "a: got ['x', 1, None]; b" and small.got == ["x", 1, None]


def test_shape_errors_are_capped_and_counted() -> None:
    from hyperpod_cdk.core.config import parse_model

    with pytest.raises(ConfigurationError) as raised:
        parse_model({f"unknown_{i}": i for i in range(5_000)})
    problems = raised.value.problems
    assert len(problems) == MAX_SHAPE_PROBLEMS + 1
    assert f"{5_000 - MAX_SHAPE_PROBLEMS:,} more shape errors not shown" in problems[-1]


def test_a_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"cluster_name: \xff\xfe\n")
    with pytest.raises(ConfigurationError, match="not UTF-8"):
        load_file(path)
