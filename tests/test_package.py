"""The distribution as a user gets it: the wheel built from this checkout, installed into a venv outside it,
serving a user's own CDK app - ``TrainingCluster`` in a stack of theirs, and ``ClusterNetwork`` +
``LustreStorage`` in an existing stack - and ``examples/embed/app.py``, with the pinned aws-cdk-lib and with the
oldest the declared range allows; a ``hyperpod-cdk init`` project that the pinned CDK CLI synthesizes as it is;
``local`` plugged in by the emulator's entry point.

The venvs are cached in ``$HYPERPOD_CDK_VENV_CACHE`` (default ``/var/tmp/hyperpod-cdk-venvs``) under a hash of
the wheel's dependencies and the versions chosen; each run reinstalls only the two wheels (``--no-deps``). A
cold run creates them from the package registry (about a minute each here); a warm run spends its time in the
synths.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "requirements" / "constraints.txt"
CDK_CLI = ROOT / "node_modules" / ".bin" / "cdk"
CACHE = Path(os.environ.get("HYPERPOD_CDK_VENV_CACHE", "/var/tmp/hyperpod-cdk-venvs"))
BANNER = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"

USER_APP = '''
import json, sys
from importlib import metadata

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2, aws_s3 as s3
from constructs import Construct

import hyperpod_cdk
from hyperpod_cdk import ClusterConfig, ClusterNetwork, InstanceGroup, LustreStorage, NodeRole, TrainingCluster


class TeamStack(cdk.Stack):
    """A stack of the user's, with a resource of theirs, that also holds a whole training cluster."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        s3.Bucket(self, "TeamResults", enforce_ssl=True)
        groups = [
            InstanceGroup(name="controller", role=NodeRole.CONTROLLER, instance_type="ml.m5.xlarge", count=1),
            InstanceGroup(name="workers", instance_type="ml.g5.8xlarge", count=2),
        ]
        TrainingCluster(self, config=ClusterConfig(cluster_name="team-cluster", instance_groups=groups))


class PlatformStack(cdk.Stack):
    """An existing platform stack (its VPC and node security group) adding shared scratch storage."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        vpc = ec2.Vpc.from_vpc_attributes(
            self, "Vpc", vpc_id="vpc-0a1b2c3d4e5f67890", availability_zones=["us-west-2a"],
            private_subnet_ids=["subnet-0a1b2c3d4e5f67890"],
        )
        nodes = ec2.SecurityGroup.from_security_group_id(self, "Nodes", "sg-0a1b2c3d4e5f67890")
        network = ClusterNetwork(self, "Network", vpc=vpc, subnet=vpc.private_subnets[0], security_group=nodes)
        LustreStorage(self, "Scratch", network=network, storage_capacity_gib=2400)


app = cdk.App(outdir=sys.argv[1])
TeamStack(app, "team")
PlatformStack(app, "platform")
app.synth()
print(json.dumps({"hyperpod_cdk": hyperpod_cdk.__file__, "aws_cdk_lib": metadata.version("aws-cdk-lib")}))
'''


@dataclass(frozen=True)
class Wheels:
    library: Path
    emulator: Path

    def requires(self) -> list[str]:
        """The library's unconditional Requires-Dist lines, as the wheel's metadata has them."""
        with zipfile.ZipFile(self.library) as wheel:
            [name] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
            lines = wheel.read(name).decode().splitlines()
        return sorted(line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:"))

    def oldest_cdk(self) -> str:
        [spec] = [r for r in self.requires() if re.match(r"aws-cdk-lib\b", r)]
        found = re.search(r">=\s*([0-9.]+)", spec)
        assert found, f"aws-cdk-lib needs a lower bound: {spec}"
        return found.group(1)


def pinned(name: str) -> str:
    for line in CONSTRAINTS.read_text().splitlines():
        if line.lower().startswith(f"{name}=="):
            return line.split("==", 1)[1].strip()
    raise AssertionError(f"{CONSTRAINTS} pins no {name}")


def _build(source: Path, names: list[str], scratch: Path, out: Path) -> Path:
    """A wheel of ``names`` (files and folders) of ``source``, built from a copy: nothing but those files."""
    scratch.mkdir()
    for name in names:
        path = source / name
        if path.is_dir():
            shutil.copytree(path, scratch / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(path, scratch / name)
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out)]
    subprocess.run([*pip, str(scratch)], check=True, capture_output=True, timeout=300)
    [wheel] = [w for w in out.glob("*.whl") if w.name.split("-")[0] == scratch.name.replace("-", "_")]
    return wheel


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    base = tmp_path_factory.mktemp("wheels")
    out = base / "dist"
    library = _build(ROOT, ["pyproject.toml", "README.md", "src"], base / "hyperpod-cdk", out)
    emulator = _build(ROOT / "hyperpod-local", ["pyproject.toml", "README.md", "src"], base / "hyperpod-local", out)
    return Wheels(library, emulator)


class Venv:
    """A cached venv (its dependencies installed once) with this run's wheels reinstalled."""

    def __init__(self, wheels: Wheels, cdk_version: str, constraints: Path | None) -> None:
        pins = constraints.read_text() if constraints else ""
        key = json.dumps([sys.version, wheels.requires(), cdk_version, pins])
        self.path = CACHE / hashlib.sha256(key.encode()).hexdigest()[:16]
        self.wheels, self.cdk_version, self.constraints = wheels, cdk_version, constraints

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    def pip(self, *args: str) -> None:
        command = [str(self.bin / "python"), "-m", "pip", "install", "--quiet", "--no-compile", *args]
        subprocess.run(command, check=True, capture_output=True, timeout=900)

    def ready(self) -> Venv:
        wheels = [str(self.wheels.library), str(self.wheels.emulator)]
        if not (self.path / ".ready").exists():
            shutil.rmtree(self.path, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(self.path)], check=True)
            (self.path / "constraints.txt").write_text(
                self.constraints.read_text() if self.constraints else f"aws-cdk-lib=={self.cdk_version}\n"
            )
            self.pip("--constraint", str(self.path / "constraints.txt"), *wheels)
            (self.path / ".ready").touch()
        self.pip("--no-deps", "--force-reinstall", *wheels)
        return self

    def env(self) -> dict[str, str]:
        """A user's shell: the venv first on PATH, no PYTHONPATH (so nothing of this checkout), no banner switch."""
        drop = ("PYTHONPATH", "VIRTUAL_ENV", BANNER)
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", "")])
        return env

    def run(self, argv: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=cwd, env=self.env(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def lock() -> Iterator[None]:
    """One test run at a time per cache (two would reinstall wheels under each other)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="module")
def pinned_venv(wheels: Wheels, lock: None) -> Venv:
    return Venv(wheels, pinned("aws-cdk-lib"), CONSTRAINTS).ready()


@pytest.fixture(scope="module")
def oldest_venv(wheels: Wheels, lock: None) -> Venv:
    return Venv(wheels, wheels.oldest_cdk(), None).ready()


def test_the_wheel_holds_every_source_and_data_file(wheels: Wheels) -> None:
    """The lifecycle assets, the node runtime, the data files and the init template ship; and the library
    declares ranges, not the pins its own app and tests use."""
    names = set(zipfile.ZipFile(wheels.library).namelist())
    sources = {
        str(path.relative_to(ROOT / "src"))
        for package in ("hyperpod_cdk", "training_runtime")
        for path in (ROOT / "src" / package).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert sources - names == set()
    assert {"hyperpod_cdk/lifecycle_assets/on_create.sh", "training_runtime/__main__.py"} <= names
    assert "hyperpod_cdk/data/recommended-feature-flags.json" in names
    requires = wheels.requires()
    assert any(re.fullmatch(r"aws-cdk-lib(<3,>=|>=)[0-9.]+(,<3)?", r) for r in requires), requires
    assert any(re.fullmatch(r"constructs(<11,>=|>=)10[0-9.]*(,<11)?", r) for r in requires), requires
    emulator = set(zipfile.ZipFile(wheels.emulator).namelist())
    [entry_points] = [n for n in emulator if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheels.emulator).read(entry_points).decode()
    assert "[hyperpod_cdk.commands]\nlocal = hyperpod_local.cli:hyperpod_cdk_local" in text


@pytest.mark.slow  # handed out first (tests/conftest.py)
@pytest.mark.parametrize("which", ["pinned", "oldest"])
def test_a_users_own_app_embeds_the_constructs(which: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    venv: Venv = request.getfixturevalue(f"{which}_venv")
    (tmp_path / "user_app.py").write_text(USER_APP)
    result = venv.run([str(venv.bin / "python"), "user_app.py", "cdk.out"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["aws_cdk_lib"] == venv.cdk_version
    assert Path(report["hyperpod_cdk"]).is_relative_to(venv.path)  # the installed wheel, not this checkout

    def resources(stack: str) -> dict[str, int]:
        template = json.loads((tmp_path / "cdk.out" / f"{stack}.template.json").read_text())
        types: dict[str, int] = {}
        for resource in template["Resources"].values():
            types[resource["Type"]] = types.get(resource["Type"], 0) + 1
        return types

    team, platform = resources("team"), resources("platform")
    assert team["AWS::SageMaker::Cluster"] == 1 and team["AWS::FSx::FileSystem"] == 1
    assert team["AWS::S3::Bucket"] >= 2  # the user's bucket and the cluster's
    assert platform["AWS::FSx::FileSystem"] == 1 and "AWS::EC2::VPC" not in platform
    assert "AWS::SageMaker::Cluster" not in platform
    staged = {p.name for p in (tmp_path / "cdk.out").glob("asset.*/**/*")}
    assert {"on_create.sh", "on_init_complete.sh", "params.py"} <= staged  # the lifecycle prefix, from the wheel

    # examples/embed/app.py as a user runs it against the installed wheel: aws-cdk-lib's VPC and file system given
    # to HyperPodCluster on CDK's types.
    shutil.copy(ROOT / "examples" / "embed" / "app.py", tmp_path / "embed_app.py")
    embedded = venv.run([str(venv.bin / "python"), "embed_app.py", "embed.out"], cwd=tmp_path)
    assert embedded.returncode == 0, embedded.stderr[-3000:]
    template = json.loads((tmp_path / "embed.out" / "team-with-hyperpod.template.json").read_text())
    kinds = [r["Type"] for r in template["Resources"].values()]
    assert kinds.count("AWS::SageMaker::Cluster") == 1 and kinds.count("AWS::FSx::FileSystem") == 1  # the user's


@pytest.mark.slow  # 5 s or more: make test, not make test-fast
def test_an_init_project_synthesizes_as_it_is(pinned_venv: Venv, tmp_path: Path) -> None:
    """`hyperpod-cdk init`, then the pinned CDK CLI: no feature-flag notice, no jsii Node banner."""
    assert CDK_CLI.exists(), "the pinned CDK CLI: npm ci (make setup)"
    created = pinned_venv.run([str(pinned_venv.bin / "hyperpod-cdk"), "init", "project"], cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    project = tmp_path / "project"
    env = {"CDK_DISABLE_VERSION_CHECK": "1"}
    result = subprocess.run(
        [str(CDK_CLI), "synth", "--quiet"],
        cwd=project,
        env={**pinned_venv.env(), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert "feature flags" not in output and "end-of-life" not in output, output[-2000:]
    template = json.loads((project / "cdk.out" / "hyperpod-my-cluster.template.json").read_text())
    assert any(r["Type"] == "AWS::SageMaker::Cluster" for r in template["Resources"].values())


def test_local_plugs_in_through_the_emulators_entry_point(pinned_venv: Venv, tmp_path: Path) -> None:
    result = pinned_venv.run([str(pinned_venv.bin / "hyperpod-cdk"), "local", "--help"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: hyperpod-cdk local [-h]")  # the emulator's own parser, named for us
    # every command of the emulator's parser, as the installed wheel has it
    import argparse

    from hyperpod_local.cli import add_commands

    parser = argparse.ArgumentParser()
    add_commands(parser)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert "{" + ",".join(commands) + "}" in result.stdout
