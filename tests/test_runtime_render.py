"""Slurm file generators: golden files, hostlist round trips, validation that reports every problem.

Golden files live in tests/golden/. After an intended change, regenerate them with
``UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_runtime_render.py`` and review the diff.
"""

from __future__ import annotations

import dataclasses
import random
import re
from pathlib import Path

import pytest

from reviewed_files import check_reviewed
from training_runtime.hardware import INSTANCE_HARDWARE, NodeHardware, hardware_for
from training_runtime.render import (
    Partition,
    RenderError,
    SlurmNode,
    SlurmSettings,
    compress,
    expand,
    render_cgroup_conf,
    render_gres_conf,
    render_slurm_conf,
    render_slurmdbd_conf,
)
from training_runtime.render.slurm_conf import managed_keys
from training_runtime.render.slurmdbd_conf import escape_value

GOLDEN = Path(__file__).parent / "golden"


def check_golden(name: str, text: str) -> None:
    """Compare with tests/golden/<name>; UPDATE_GOLDEN=1 writes it; a missing file fails (tests/reviewed_files.py)."""
    check_reviewed(GOLDEN / name, text, "UPDATE_GOLDEN")


def nodes_of(instance_type: str, names_and_ips: list[tuple[str, str]]) -> list[SlurmNode]:
    hardware = hardware_for(instance_type, {})
    assert hardware is not None
    return [SlurmNode(name, ip, hardware) for name, ip in names_and_ips]


def ip_name(ip: str) -> str:
    return "ip-" + ip.replace(".", "-")


def ips(*addresses: str) -> list[tuple[str, str]]:
    return [(ip_name(a), a) for a in addresses]


# --- the three clusters of the golden files ---------------------------------------------------------

TRN1_WORKERS = nodes_of("ml.trn1.32xlarge", ips("10.1.4.11", "10.1.4.12", "10.1.5.7", "10.1.5.9"))
TRN1_SETTINGS = SlurmSettings(
    cluster_name="Trn1-Cluster",
    controller_name="ip-10-1-0-10",  # an ml.m5.xlarge: the controller runs slurmctld, it is not a node
    controller_address="10.1.0.10",
)
TRN1_PARTITIONS = [
    Partition("pretrain", tuple(n.name for n in TRN1_WORKERS[:3])),
    Partition("debug", (TRN1_WORKERS[3].name,)),
]

P5_WORKERS = nodes_of("ml.p5.48xlarge", ips("10.2.8.21", "10.2.8.22", "10.2.8.23"))
G5_WORKERS = nodes_of("ml.g5.12xlarge", ips("10.2.9.4", "10.2.9.5"))
GPU_NODES = P5_WORKERS + G5_WORKERS
GPU_SETTINGS = SlurmSettings(
    cluster_name="gpu-cluster",
    controller_name="ip-10-2-0-5",
    controller_address="10.2.0.5",
    accounting_host="ip-10-2-0-5",
    health_check_program="/opt/hyperpod-cdk/bin/node-health",
    prolog="/opt/hyperpod-cdk/bin/prolog",
    epilog="/opt/hyperpod-cdk/bin/epilog",
    prolog_flags="Alloc",
)
GPU_PARTITIONS = [
    Partition("dev", tuple(n.name for n in G5_WORKERS)),
    Partition("train", tuple(n.name for n in P5_WORKERS), default=True),
]

EMULATION_NODE = NodeHardware(cpus=2, sockets=1, cores_per_socket=2, threads_per_core=1, memory_mib=2000)
EMULATION_NODES = [SlurmNode("w1", "10.250.0.11", EMULATION_NODE), SlurmNode("w2", "10.250.0.12", EMULATION_NODE)]
EMULATION_SETTINGS = SlurmSettings(
    cluster_name="lab",
    controller_name="ctl",
    controller_address="10.250.0.10",
    accounting_host="ctl",
    slurmd_timeout=10,
    message_timeout=5,
    cred_expire=70,
    sched_interval=2,
)
"""A two-node cluster with fast failure detection, the values docs/research/local-slurm.md verified (the local
cluster's own overlay is checked through the real step in test_local_layout.py)."""


def test_slurm_conf_trn1_cluster() -> None:
    check_golden("slurm.conf.trn1", render_slurm_conf(TRN1_SETTINGS, TRN1_WORKERS, TRN1_PARTITIONS))


def test_slurm_conf_gpu_cluster() -> None:
    check_golden("slurm.conf.gpu", render_slurm_conf(GPU_SETTINGS, GPU_NODES, GPU_PARTITIONS))


def test_gres_conf_gpu_cluster() -> None:
    check_golden("gres.conf.gpu", render_gres_conf(GPU_NODES))


def test_gres_conf_trn1_cluster() -> None:
    check_golden("gres.conf.trn1", render_gres_conf(TRN1_WORKERS))


def test_cgroup_conf_both_ways() -> None:
    check_golden("cgroup.conf.unconstrained", render_cgroup_conf(constrain=False))
    check_golden("cgroup.conf.constrained", render_cgroup_conf(constrain=True))


def test_slurmdbd_conf() -> None:
    check_golden(
        "slurmdbd.conf",
        render_slurmdbd_conf(
            dbd_host="ctl",
            storage_host="localhost",
            storage_port=3306,
            storage_user="slurm",
            storage_pass="slurmpw",
        ),
    )


# --- what the golden files must say (a regenerated golden file cannot silently lose these) ----------


def settings_of(text: str) -> dict[str, list[str]]:
    """slurm.conf as Slurm reads it: comments stripped, Key=Value per line (node/partition lines by name)."""
    result: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            key, value = line.split("=", 1)
            result.setdefault(key, []).append(value)
    return result


def test_a_small_fast_recovering_cluster_renders_the_verified_settings() -> None:
    conf = settings_of(render_slurm_conf(EMULATION_SETTINGS, EMULATION_NODES, [Partition("dev", ("w1", "w2"))]))
    verified = {  # local Slurm emulation research, sections 3.1 and 6.6
        "ClusterName": "lab",
        "SlurmctldHost": "ctl(10.250.0.10)",
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "AuthInfo": "cred_expire=70",
        "MailProg": "/bin/true",
        "MpiDefault": "none",
        "ProctrackType": "proctrack/linuxproc",
        "TaskPlugin": "task/none",
        "AccountingStorageType": "accounting_storage/slurmdbd",
        "AccountingStorageHost": "ctl",
        "JobAcctGatherType": "jobacct_gather/linux",
        "SchedulerType": "sched/backfill",
        "SchedulerParameters": "sched_interval=2,bf_interval=30",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_Core",
        "SlurmdTimeout": "10",
        "SlurmctldTimeout": "120",
        "MessageTimeout": "5",
        "ReturnToService": "2",
        "JobRequeue": "1",
        "KillWait": "30",
    }
    assert {key: conf[key] for key in verified} == {key: [value] for key, value in verified.items()}
    assert conf["NodeName"] == [
        "w1 NodeAddr=10.250.0.11 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1500 State=UNKNOWN",
        "w2 NodeAddr=10.250.0.12 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1500 State=UNKNOWN",
    ]
    assert conf["PartitionName"] == ["dev Nodes=w[1-2] Default=YES MaxTime=INFINITE State=UP"]
    assert "GresTypes" not in conf and "AccountingStorageTRES" not in conf


def test_defaults_are_slurms_production_values() -> None:
    conf = settings_of(render_slurm_conf(TRN1_SETTINGS, TRN1_WORKERS, TRN1_PARTITIONS))
    assert conf["ClusterName"] == ["trn1-cluster"]  # Slurm lower-cases it; so do we
    assert conf["AuthInfo"] == ["cred_expire=120"]
    assert conf["SlurmdTimeout"] == ["300"] and conf["MessageTimeout"] == ["10"]
    assert conf["SchedulerParameters"] == ["sched_interval=60,bf_interval=30"]
    assert conf["AccountingStorageType"] == ["accounting_storage/none"]
    assert conf["JobAcctGatherType"] == ["jobacct_gather/none"]
    assert "AccountingStorageHost" not in conf and "GresTypes" not in conf and "HealthCheckProgram" not in conf
    keys = [key for key in conf if key not in ("NodeName", "PartitionName")]
    assert all(len(conf[key]) == 1 for key in keys), "a setting is written twice"


def test_gpu_cluster_declares_gres_and_gpu_accounting() -> None:
    conf = settings_of(render_slurm_conf(GPU_SETTINGS, GPU_NODES, GPU_PARTITIONS))
    assert conf["GresTypes"] == ["gpu"]
    assert conf["AccountingStorageTRES"] == ["gres/gpu"]
    assert conf["JobAcctGatherFrequency"] == ["30"]
    assert [line.split()[-2] for line in conf["NodeName"]] == ["Gres=gpu:h100:8"] * 3 + ["Gres=gpu:a10g:4"] * 2
    assert conf["PartitionName"] == [
        "dev Nodes=ip-10-2-9-[4-5] Default=NO MaxTime=INFINITE State=UP",
        "train Nodes=ip-10-2-8-[21-23] Default=YES MaxTime=INFINITE State=UP",
    ]
    assert conf["HealthCheckProgram"] == ["/opt/hyperpod-cdk/bin/node-health"]
    assert conf["HealthCheckInterval"] == ["300"] and conf["HealthCheckNodeState"] == ["ANY"]
    assert conf["PrologFlags"] == ["Alloc"]
    gres = render_gres_conf(GPU_NODES).splitlines()
    assert [line for line in gres if not line.startswith("#")] == [
        "NodeName=ip-10-2-9-[4-5] Name=gpu Type=a10g File=/dev/nvidia[0-3]",
        "NodeName=ip-10-2-8-[21-23] Name=gpu Type=h100 File=/dev/nvidia[0-7]",
    ]


# --- slurm.conf behaviour ---------------------------------------------------------------------------


def minimal(**settings: object) -> str:
    values: dict[str, object] = {"cluster_name": "c", "controller_name": "ctl", "controller_address": "10.0.0.1"}
    values.update(settings)
    return render_slurm_conf(SlurmSettings(**values), EMULATION_NODES, [Partition("p", ("w1", "w2"))])  # type: ignore[arg-type]


def test_the_first_partition_is_default_when_none_is_marked() -> None:
    parts = [Partition("a", ("w1",)), Partition("b", ("w2",))]
    conf = settings_of(render_slurm_conf(EMULATION_SETTINGS, EMULATION_NODES, parts))
    assert [p.split()[:3] for p in conf["PartitionName"]] == [
        ["a", "Nodes=w1", "Default=YES"],
        ["b", "Nodes=w2", "Default=NO"],
    ]
    parts = [Partition("a", ("w1",)), Partition("b", ("w2",), default=True)]
    conf = settings_of(render_slurm_conf(EMULATION_SETTINGS, EMULATION_NODES, parts))
    assert [p.split()[2] for p in conf["PartitionName"]] == ["Default=NO", "Default=YES"]


def test_an_empty_partition_has_no_nodes_key() -> None:
    parts = [Partition("a", ("w1", "w2")), Partition("later", ())]
    conf = settings_of(render_slurm_conf(EMULATION_SETTINGS, EMULATION_NODES, parts))
    assert conf["PartitionName"][1] == "later Default=NO MaxTime=INFINITE State=UP"


def test_a_node_without_hardware_gets_only_name_and_address_and_a_comment() -> None:
    nodes = [*EMULATION_NODES, SlurmNode("x1", "10.0.0.9", None)]
    text = render_slurm_conf(EMULATION_SETTINGS, nodes, [Partition("p", ("w1", "w2", "x1"))])
    assert "\nNodeName=x1 NodeAddr=10.0.0.9\n" in text
    assert "# 1 node(s) below have no hardware figures" in text
    assert "have no hardware figures" not in minimal()


def test_gpus_without_a_type_are_declared_untyped() -> None:
    hw = NodeHardware(4, 1, 4, 1, 16000, gpus=2)
    nodes = [SlurmNode("g1", "10.0.0.2", hw)]
    assert "RealMemory=14976 Gres=gpu:2 State=UNKNOWN" in render_slurm_conf(
        EMULATION_SETTINGS, nodes, [Partition("p", ("g1",))]
    )
    assert "NodeName=g1 Name=gpu File=/dev/nvidia[0-1]" in render_gres_conf(nodes)


def test_configless_health_check_and_extra_lines() -> None:
    text = minimal(
        configless=True,
        health_check_program="/bin/hc",
        health_check_interval=60,
        health_check_node_state="IDLE,CYCLE",
        extra_lines=("# site additions", "SlurmctldPort=16817", "TreeWidth=128"),
    )
    conf = settings_of(text)
    assert conf["SlurmctldParameters"] == ["enable_configless"]
    assert (conf["HealthCheckInterval"], conf["HealthCheckNodeState"]) == (["60"], ["IDLE,CYCLE"])
    assert text.endswith(
        "# --- extra lines (SlurmSettings.extra_lines)\n# site additions\nSlurmctldPort=16817\nTreeWidth=128\n"
    )


def test_uses_cgroup() -> None:
    assert not SlurmSettings("c", "ctl", "10.0.0.1").uses_cgroup
    assert SlurmSettings("c", "ctl", "10.0.0.1", task_plugin="task/affinity,task/cgroup").uses_cgroup
    assert SlurmSettings("c", "ctl", "10.0.0.1", proctrack="proctrack/cgroup").uses_cgroup


def test_output_does_not_depend_on_partition_member_order() -> None:
    names = [n.name for n in TRN1_WORKERS]
    forward = render_slurm_conf(TRN1_SETTINGS, TRN1_WORKERS, [Partition("p", tuple(names))])
    backward = render_slurm_conf(TRN1_SETTINGS, TRN1_WORKERS, [Partition("p", tuple(reversed(names)))])
    assert forward == backward


def test_every_problem_is_reported_at_once() -> None:
    hw = NodeHardware(4, 1, 2, 1, 8000)  # 4 != 1 * 2 * 1
    nodes = [
        SlurmNode("w1", "10.0.0.1", None),
        SlurmNode("w1", "10.0.0.2", None),
        SlurmNode("bad name", "10.0.0.3", None),
        SlurmNode("w4", "", None),
        SlurmNode("w5", "10.0.0.5", hw),
    ]
    settings = SlurmSettings(
        cluster_name="c c",
        controller_name="ctl",
        controller_address="10.0.0.9",
        cred_expire=10,
        return_to_service=3,
        slurmd_timeout=0,
        proctrack="proctrack/magic",
        log_dir="var/log",
        prolog_flags="Contain",
        extra_lines=("SlurmdTimeout=5", "Two\nlines"),
    )
    partitions = [
        Partition("p", ("w1", "ghost", "phantom"), default=True),
        Partition("p", ("w1",), default=True),
        Partition("DEFAULT", ()),
    ]
    with pytest.raises(RenderError) as raised:
        render_slurm_conf(settings, nodes, partitions)
    problems = raised.value.problems
    expected = [
        r"settings\.cluster_name: got 'c c'",
        r"settings\.log_dir: got 'var/log'; expected an absolute path",
        r"settings\.proctrack: got 'proctrack/magic'; allowed: proctrack/linuxproc",
        r"settings\.return_to_service: got 3; allowed: 0, 1, 2",
        r"settings\.slurmd_timeout: got 0; expected whole seconds",
        r"settings\.cred_expire: got 10; must be at least 70 s\..*stale signal.*local-slurm\.md §6\.3",
        r"settings\.prolog_flags: got 'Contain'; Contain .* needs proctrack/cgroup",
        r"nodes\[1\]\.name: 'w1' is already used by nodes\[0\]",
        r"nodes\[2\]\.name: got 'bad name'",
        r"nodes\[3\]\.address: got ''; expected an IP address or host name",
        r"nodes\[4\]\.hardware \(w5\)\.cpus: got 4; must equal sockets \* cores_per_socket \* threads_per_core",
        r"partitions\[0\]\.nodes: 'ghost', 'phantom' not among the nodes",
        r"partitions\[1\]\.name: 'p' is used twice",
        r"partitions\[2\]\.name: got 'DEFAULT'; .*'DEFAULT' is reserved",
        r"partitions: partitions\[0\] \(p\), partitions\[1\] \(p\) are all marked default",
        r"settings\.extra_lines\[0\]: 'SlurmdTimeout=5' sets SlurmdTimeout, .*SlurmSettings\.slurmd_timeout instead",
        r"settings\.extra_lines\[1\]: got 'Two\\nlines'; expected one line",
    ]
    unmatched = [pattern for pattern in expected if not any(re.search(pattern, p) for p in problems)]
    assert unmatched == [], "\n".join(problems)
    assert len(problems) == len(expected), "\n".join(problems)
    assert f"({len(expected)} problems)" in str(raised.value)


def test_no_partition_is_a_problem() -> None:
    with pytest.raises(RenderError, match="partitions: none given"):
        render_slurm_conf(EMULATION_SETTINGS, EMULATION_NODES, [])


@pytest.mark.parametrize("cred_expire", [0, 69])
def test_cred_expire_below_70_is_rejected(cred_expire: int) -> None:
    with pytest.raises(RenderError, match=f"cred_expire: got {cred_expire}; must be at least 70"):
        minimal(cred_expire=cred_expire)
    assert "AuthInfo=cred_expire=70\n" in minimal(cred_expire=70)


def test_extra_lines_may_not_set_fixed_keys_but_may_add_nodes() -> None:
    with pytest.raises(
        RenderError, match=r"sets SelectType, which this file already sets; it is fixed by hyperpod-cdk"
    ):
        minimal(extra_lines=("SelectType=select/linear",))
    with pytest.raises(RenderError, match=r"expected Key=Value"):
        minimal(extra_lines=("just words",))
    text = minimal(extra_lines=("NodeName=spare NodeAddr=10.0.0.50", "PartitionName=spare Nodes=spare"))
    assert text.endswith("NodeName=spare NodeAddr=10.0.0.50\nPartitionName=spare Nodes=spare\n")
    assert managed_keys()["slurmdtimeout"] == "slurmd_timeout"
    assert managed_keys()["accountingstoragehost"] == "accounting_host"


def test_prolog_flags_and_health_states_are_checked() -> None:
    with pytest.raises(RenderError, match="prolog_flags: got 'Alloc,Bogus'; comma-separated, from: Alloc"):
        minimal(prolog_flags="Alloc,Bogus")
    with pytest.raises(RenderError, match="health_check_node_state: got 'BUSY'"):
        minimal(health_check_program="/bin/hc", health_check_node_state="BUSY")
    assert "PrologFlags=Contain,X11" in minimal(prolog_flags="Contain,X11", proctrack="proctrack/cgroup")


def big_cluster(count: int) -> tuple[list[SlurmNode], list[Partition]]:
    hardware = INSTANCE_HARDWARE["ml.p5.48xlarge"]
    nodes = [
        SlurmNode(f"ip-10-1-{i // 250}-{i % 250 + 1}", f"10.1.{i // 250}.{i % 250 + 1}", hardware) for i in range(count)
    ]
    quarter = max(1, count // 4)
    partitions = [Partition(f"p{k}", tuple(n.name for n in nodes[k * quarter : (k + 1) * quarter])) for k in range(4)]
    return nodes, partitions


def test_ten_thousand_nodes_render_completely() -> None:
    """How long it takes is measured in bench/render.py, not asserted here."""
    nodes, partitions = big_cluster(10_000)
    text = render_slurm_conf(GPU_SETTINGS, nodes, partitions)
    conf = settings_of(text)
    assert len(conf["NodeName"]) == 10_000
    declared = {line.split()[0] for line in conf["NodeName"]}
    in_partitions = [name for line in conf["PartitionName"] for name in expand(line.split()[1][len("Nodes=") :])]
    assert sorted(in_partitions) == sorted(declared)
    assert len(conf["PartitionName"][0]) < 1000, "partition hostlists should be compressed"


# --- gres.conf, cgroup.conf, slurmdbd.conf ----------------------------------------------------------


def test_gres_conf_without_gpus_is_only_comments() -> None:
    text = render_gres_conf([*EMULATION_NODES, SlurmNode("u", "10.0.0.3", None)])
    assert text.endswith("\n")
    assert all(line.startswith("#") for line in text.splitlines())
    assert "No node has NVIDIA GPUs" in text


def test_gres_conf_groups_nodes_by_gpu_layout_and_notes_neuron_devices() -> None:
    one_gpu = nodes_of("ml.g5.xlarge", [("g1", "10.0.0.1"), ("g2", "10.0.0.2"), ("g4", "10.0.0.4")])
    text = render_gres_conf(one_gpu + TRN1_WORKERS)
    lines = text.splitlines()
    assert "NodeName=g[1-2,4] Name=gpu Type=a10g File=/dev/nvidia0" in lines
    assert "# ip-10-1-4-[11-12],ip-10-1-5-[7,9]: 16 Neuron devices each, not declared" in text
    assert sum(1 for line in lines if line.startswith("NodeName=")) == 1


def test_gres_conf_rejects_bad_hardware() -> None:
    with pytest.raises(RenderError, match=r"nodes\[0\]\.hardware \(g1\)\.gpus: got -1"):
        render_gres_conf([SlurmNode("g1", "10.0.0.1", NodeHardware(1, 1, 1, 1, 1000, gpus=-1))])


def test_cgroup_conf_keys() -> None:
    def keys(text: str) -> dict[str, str]:
        return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))

    assert keys(render_cgroup_conf(constrain=False)) == {
        "CgroupPlugin": "autodetect",
        "ConstrainCores": "no",
        "ConstrainRAMSpace": "no",
        "ConstrainSwapSpace": "no",
        "ConstrainDevices": "no",
    }
    assert keys(render_cgroup_conf(constrain=True)) == {
        "CgroupPlugin": "autodetect",
        "ConstrainCores": "yes",
        "ConstrainRAMSpace": "yes",
        "ConstrainSwapSpace": "yes",
        "ConstrainDevices": "yes",
    }


def dbd(**overrides: object) -> str:
    values: dict[str, object] = {
        "dbd_host": "ctl",
        "storage_host": "db.example.internal",
        "storage_port": 3306,
        "storage_user": "slurm",
        "storage_pass": "s3cret",
    }
    values.update(overrides)
    return render_slurmdbd_conf(**values)  # type: ignore[arg-type]


def test_slurmdbd_conf_escapes_what_slurms_parser_would_misread() -> None:
    text = dbd(storage_pass="a#b\\c")
    assert "\nStoragePass=a\\#b\\\\c\n" in text
    assert escape_value("plain") == "plain"
    assert "mode 0600" in text and "SlurmUser=slurm" in text


def unescape_like_slurm(line: str) -> str:
    """Slurm's parse_config: cut at an unescaped '#', then drop one level of backslash escapes."""
    backslashes = 0
    for index, char in enumerate(line):
        if char == "#" and backslashes % 2 == 0:
            line = line[:index]
            break
        backslashes = backslashes + 1 if char == "\\" else 0
    return re.sub(r"\\(.)", r"\1", line)


@pytest.mark.parametrize("password", ["plain", "a#b", "back\\slash", "#\\#\\\\", "ends\\", "q'uote"])
def test_slurmdbd_password_reads_back_exactly(password: str) -> None:
    line = next(line for line in dbd(storage_pass=password).splitlines() if line.startswith("StoragePass="))
    assert unescape_like_slurm(line) == "StoragePass=" + password


def test_slurmdbd_conf_reports_every_problem_without_the_password() -> None:
    with pytest.raises(RenderError) as raised:
        dbd(dbd_host="", storage_host="bad host", storage_port=70000, storage_pass="has space", storage_loc="x-y")
    message = str(raised.value)
    assert "(5 problems)" in message
    for field in ("dbd_host", "storage_host", "storage_port", "storage_pass", "storage_loc"):
        assert f"  - {field}:" in message
    assert "has space" not in message


def test_slurmdbd_storage_port_is_a_tcp_port() -> None:
    assert "StoragePort=65535" in dbd(storage_port=65535) and "StoragePort=1\n" in dbd(storage_port=1)
    for bad in (0, 65536, True):
        with pytest.raises(RenderError, match=r"storage_port: got .*; expected a TCP port from 1 to 65535"):
            dbd(storage_port=bad)


# --- hostlist ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "expression"),
    [
        (["w1", "w2", "w3", "w5", "ctl"], "ctl,w[1-3,5]"),
        (["ip-10-1-2-3", "ip-10-1-2-4"], "ip-10-1-2-[3-4]"),
        (["ip-10-1-2-3"], "ip-10-1-2-3"),
        (["w08", "w09", "w10"], "w[08-10]"),
        (["w9", "w10", "w11"], "w[9-11]"),
        (["w1", "w01", "w001"], "w1,w01,w001"),
        (["w1", "w2", "w01", "w02"], "w[1-2],w[01-02]"),
        (["w0", "w00"], "w0,w00"),
        (["login", "ctl", "123"], "123,ctl,login"),
        (["a1", "a1", "a2"], "a[1-2]"),
        (["n1.x", "n2.x"], "n1.x,n2.x"),
        ([], ""),
    ],
)
def test_compress_examples(names: list[str], expression: str) -> None:
    assert compress(names) == expression
    assert sorted(expand(expression)) == sorted(set(names))


def test_expand_follows_slurms_width_rule() -> None:
    assert expand("w[9-11]") == ["w9", "w10", "w11"]
    assert expand("w[098-101]") == ["w098", "w099", "w100", "w101"]
    assert expand("r[1-2]n[01-02]x,ctl") == ["r1n01x", "r1n02x", "r2n01x", "r2n02x", "ctl"]
    assert expand("a[1-3,05],b-[1-2]x[1-2],c") == ["a1", "a2", "a3", "a05", "b-1x1", "b-1x2", "b-2x1", "b-2x2", "c"]
    assert expand("") == []


@pytest.mark.parametrize("bad", ["w[1-", "w1]", "w[3-1]", "w[a]", "w[1-2-3]", "a,,b", ",a", "w[[1]]", "w[]", "a b"])
def test_expand_rejects_malformed_expressions(bad: str) -> None:
    with pytest.raises(ValueError, match="hostlist"):
        expand(bad)


@pytest.mark.parametrize("bad", ["", "w[1]", "a,b", "a b"])
def test_compress_rejects_names_that_cannot_be_listed(bad: str) -> None:
    with pytest.raises(ValueError, match="hostlist: got"):
        compress(["ok1", bad])


def random_names(rng: random.Random, count: int) -> list[str]:
    prefixes = ["w", "gpu-", "ip-10-1-2-", "ip-10-1-3-", "node", "n1-r", "x"]
    names = []
    for _ in range(count):
        prefix = rng.choice(prefixes)
        roll = rng.random()
        if roll < 0.05:
            names.append(prefix.rstrip("-") + "-head")  # no trailing digits
        elif roll < 0.3:
            names.append(prefix + str(rng.randrange(0, 200)).zfill(rng.choice([2, 3, 4])))  # zero padded
        else:
            names.append(prefix + str(rng.randrange(0, 2000)))
    return names


@pytest.mark.parametrize("seed", range(40))
def test_compress_then_expand_round_trips(seed: int) -> None:
    rng = random.Random(seed)
    names = random_names(rng, rng.randrange(1, 300))
    expression = compress(names)
    expanded = expand(expression)
    assert sorted(expanded) == sorted(set(names))
    assert len(expanded) == len(set(expanded)), "a name appears twice in the expression"
    shuffled = names[:]
    rng.shuffle(shuffled)
    assert compress(shuffled) == expression, "output must not depend on input order"


def test_ten_thousand_names_round_trip() -> None:
    """How long it takes is measured in bench/render.py, not asserted here."""
    names = [f"ip-10-1-{i // 250}-{i % 250 + 1}" for i in range(10_000)]
    random.Random(7).shuffle(names)
    expression = compress(names)
    expanded = expand(expression)
    assert sorted(expanded) == sorted(names)
    assert expression.startswith("ip-10-1-0-[1-250],ip-10-1-1-[1-250],")
    padded = [f"n{i:05d}" for i in range(10_000) if i % 7]
    assert sorted(expand(compress(padded))) == sorted(padded)


def test_hyperpods_layout_keeps_accounting_in_an_included_file() -> None:
    """HyperPod's slurm.conf includes accounting.conf (the runtime writes it when accounting is on)."""
    settings = SlurmSettings("c", "ctl", "10.0.0.1", accounting_include="/opt/slurm/etc/accounting.conf")
    nodes = [SlurmNode("w1", "10.0.0.2", None)]
    text = render_slurm_conf(settings, nodes, [Partition("p", ("w1",))])
    assert "include /opt/slurm/etc/accounting.conf" in text.splitlines()
    assert "AccountingStorageType" not in text and "JobAcctGatherType" not in text
    with pytest.raises(RenderError, match=r"accounting_include.*not both"):
        render_slurm_conf(dataclasses.replace(settings, accounting_host="ctl"), nodes, [Partition("p", ("w1",))])
    parts = [Partition("p", ("w1",))]
    by_name = render_slurm_conf(dataclasses.replace(settings, accounting_include="accounting.conf"), nodes, parts)
    assert "include accounting.conf" in by_name.splitlines()
    with pytest.raises(RenderError, match="accounting_include"):
        render_slurm_conf(dataclasses.replace(settings, accounting_include="etc/acct.conf"), nodes, parts)
    header = render_slurm_conf(dataclasses.replace(settings, header=("mine",)), nodes, [Partition("p", ("w1",))])
    assert header.startswith("# mine\n")
