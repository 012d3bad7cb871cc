"""The local cluster stages exactly what a deployment uploads: from a config or from a synthesized assembly, every
file of the prefix is the deployed one, and the parameters file differs only by overlay.emulated()'s overlays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hyperpod_cdk import ClusterConfig, TrainingClusterStack
from hyperpod_local.overlay import emulated
from hyperpod_local.staging import LocalInputs, from_assembly, from_config
from hyperpod_local.state import LocalClusterError
from support import build_example, fast_app
from training_runtime.params import PARAMETERS_FILE_BY_MODE, ProvisioningParameters

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(ROOT.glob("examples/*.yaml"))
DEFAULT_STACK = "hyperpod-default"


@pytest.fixture(scope="module")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every YAML example and the default configuration (as app.py builds it), synthesized once."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = fast_app(outdir=str(outdir))
    for example in EXAMPLES:
        build_example(example, app)
    TrainingClusterStack(app, DEFAULT_STACK, config=ClusterConfig())
    app.synth()
    return outdir


def _stack(example: Path | None) -> str:
    from hyperpod_cdk.core.config import load_config
    from hyperpod_cdk.core.deployment import deployment

    return DEFAULT_STACK if example is None else deployment(load_config(example)).stack_name


@pytest.mark.parametrize("example", [*EXAMPLES, None], ids=lambda p: p.name if p else "default")
def test_config_and_assembly_stage_the_same_prefix_file_by_file(assembly: Path, example: Path | None) -> None:
    ours = from_config(example)
    synthesized = from_assembly(assembly, _stack(example))
    assert (ours.cluster_name, ours.counts) == (synthesized.cluster_name, synthesized.counts)
    assert ours.modes == synthesized.modes  # the config's modes, and the synthesized cluster's
    # Every file but the parameters file is uploaded byte for byte as the config path builds it.
    name = ours.deployed.file_name
    assert set(ours.files) == set(synthesized.files)
    assert {k: v for k, v in ours.files.items() if k != name} == {
        k: v for k, v in synthesized.files.items() if k != name
    }
    # Staged: the same bytes from both sources, the deployed files themselves but for the parameters file ...
    staged = ours.staged_files(cpus=2)
    assert staged == synthesized.staged_files(cpus=2)
    assert {k for k in staged if staged[k] != synthesized.files[k]} == {name}
    # ... which is the emulation applied to exactly what the stack uploads.
    local = ProvisioningParameters.loads(staged[name].decode())
    chosen = [g.instance_type for g in synthesized.groups if g.instance_type]
    assert local == emulated(synthesized.deployed, cpus=2, instance_types=chosen)
    assert local.emulation is not None and local.emulation.hardware is True
    assert synthesized.deployed.emulation is None, "a deployment never writes the emulation key"


def test_a_template_parameter_type_takes_its_default_and_the_node_still_reads_its_own(assembly: Path) -> None:
    inputs = from_assembly(assembly, "hyperpod-team-cluster")
    (workers,) = [g for g in inputs.groups if g.name == "workers"]
    template = json.loads((assembly / "hyperpod-team-cluster.template.json").read_text())
    assert workers.instance_type == template["Parameters"]["InstanceGroupWorkersType"]["Default"]
    assert inputs.counts["workers"] == int(template["Parameters"]["InstanceGroupWorkersCount"]["Default"])
    (deployed,) = [g for g in inputs.deployed.groups if g.name == "workers"]
    assert deployed.instance_type is None, "the uploaded file leaves it to HyperPod's resource config"
    staged = ProvisioningParameters.loads(inputs.staged_files(cpus=2)[inputs.deployed.file_name].decode())
    assert workers.instance_type in staged.options["node_hardware"]


def test_the_stack_must_be_named_when_there_are_several_and_must_exist(assembly: Path) -> None:
    with pytest.raises(LocalClusterError, match=r"stacks have a HyperPod cluster .*Fix: pass --stack NAME"):
        from_assembly(assembly)
    with pytest.raises(LocalClusterError, match="--stack: got 'nope'; the stacks with a HyperPod cluster"):
        from_assembly(assembly, "nope")
    with pytest.raises(LocalClusterError, match="not a cloud assembly"):
        from_assembly(assembly / "missing")


def test_a_deploy_time_value_the_emulation_keeps_is_refused(assembly: Path) -> None:
    inputs = from_assembly(assembly, "hyperpod-cpu-cluster")
    deployed = inputs.deployed.to_json()
    deployed["hyperpod_cdk"]["cluster_name"] = "<<marker:0xbaba:7>>"
    broken = LocalInputs(**{**inputs.__dict__, "deployed": ProvisioningParameters.from_json(deployed)})
    with pytest.raises(LocalClusterError, match=r"only known at deploy \(<<marker:0xbaba:7>>\)"):
        broken.staged_files(cpus=2)


@pytest.mark.parametrize("mode", sorted(PARAMETERS_FILE_BY_MODE))
def test_the_parameters_file_is_staged_under_its_modes_name(mode: str, tmp_path: Path) -> None:
    """The nodes read the parameters file by the mode's name (HyperPod's agent reads provisioning_parameters.json
    only in the lifecycle-driven mode): exactly that one is staged, and it says that mode."""
    config = tmp_path / "cluster.yaml"
    config.write_text(f"mode: {mode}\n")
    staged = from_config(config).staged_files(cpus=2)
    assert set(PARAMETERS_FILE_BY_MODE.values()) & set(staged) == {PARAMETERS_FILE_BY_MODE[mode]}
    assert ProvisioningParameters.loads(staged[PARAMETERS_FILE_BY_MODE[mode]].decode()).mode == mode


def test_staging_needs_neither_aws_cdk_nor_node(assembly: Path) -> None:
    """The emulator becomes its own package: reading a config or an assembly imports no aws_cdk (no jsii/Node)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from hyperpod_local import LocalCluster\n"
        "from hyperpod_local.staging import from_assembly, from_config\n"
        f"from_config({str(EXAMPLES[0])!r}).staged_files(cpus=2)\n"
        f"from_assembly({str(assembly)!r}, 'hyperpod-cpu-cluster').staged_files(cpus=2)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'jsii', 'constructs'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr


def test_the_scaler_timing_is_staged_only_when_given() -> None:
    inputs = from_config(Path(__file__).resolve().parent / "fixtures" / "scaler" / "cluster.yaml")
    name = inputs.deployed.file_name
    plain = ProvisioningParameters.loads(inputs.staged_files(cpus=2)[name].decode())
    assert plain.emulation is not None and plain.emulation.scaler_interval_s is None
    timed = ProvisioningParameters.loads(inputs.staged_files(cpus=2, scaler_timing=(1.0, 4.0))[name].decode())
    assert timed.emulation is not None
    assert (timed.emulation.scaler_interval_s, timed.emulation.scaler_minute_s) == (1.0, 4.0)
    assert timed.emulation.hardware is True


def test_the_work_directory_records_the_deployments_modes_for_the_control_plane(assembly: Path, tmp_path: Path) -> None:
    """The emulated control plane learns Continuous from the deployment (staged with the prefix), never from the
    display string of where the config came from."""
    from types import SimpleNamespace

    from hyperpod_local.control_plane.local import continuous
    from hyperpod_local.layout import plan_nodes
    from hyperpod_local.staging import deployed_modes, stage

    example = ROOT / "examples" / "continuous-cluster.yaml"
    cases = [(from_config(example), True), (from_assembly(assembly, _stack(example)), True), (from_config(None), False)]
    for inputs, is_continuous in cases:
        workdir = tmp_path / str(len(list(tmp_path.iterdir())))
        local = plan_nodes(inputs.cluster_name, inputs.groups, inputs.counts)
        stage(workdir, local, inputs.staged_files(cpus=2))
        assert deployed_modes(workdir) == inputs.modes
        assert continuous(SimpleNamespace(workdir=workdir)) is is_continuous  # type: ignore[arg-type]
    assert from_config(example).modes.node_provisioning_mode == "continuous"
    with pytest.raises(LocalClusterError, match="no record of the deployment's modes"):
        deployed_modes(tmp_path / "never-staged")
