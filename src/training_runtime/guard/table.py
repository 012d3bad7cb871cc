"""The Slurm guard's table: every breakage it knows, where it repairs or reports it, what it leaves alone and why.

One definition: the checks (:mod:`training_runtime.guard.checks`) name their row by its ``check`` id, and
``scripts/gen_guard_table.py`` renders the same rows into docs/node-runtime.md ("The Slurm guard"), with each row's
source and quote. Stdlib only, no imports of the runtime: the table is data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

CONTROLLER, LOGIN, COMPUTE = "controller", "login", "compute"
ALL_ROLES = (CONTROLLER, LOGIN, COMPUTE)
REPAIRS, REPORTS, LEAVES = "repairs", "reports", "leaves alone"

TOPOLOGY_TREE = "topology-tree-without-switch"
TOPOLOGY_YAML = "topology-yaml-empty"
TOPOLOGY_BLOCK = "topology-block-without-block"
BLOCK_POWER_DOWN = "topology-block-power-down"
TOPOLOGY_CHOSEN = "topology-chosen"
PYXIS_TWICE = "pyxis-twice"
CONFIGLESS_INCLUDE = "configless-include-path"
CONFIGLESS_MISSING = "configless-include-missing"
INCLUDE_ADJACENT = "include-adjacent"
FIGHT = "hyperpod-rewrites-again"
FIGHT_LIMIT = 5
"""Repairs of one file within :data:`FIGHT_WINDOW_S` after which the guard stops repairing it (:data:`FIGHT`)."""
FIGHT_WINDOW_S = 3600.0


@dataclass(frozen=True)
class Source:
    """Where a row's fact comes from, and the words that say it."""

    url: str
    quote: str


@dataclass(frozen=True)
class Rule:
    """One row: a state of HyperPod's Slurm files, and what the guard does about it on each role."""

    check: str
    """The id the guard's log lines, its metric's ``check`` label and the checks use."""
    state: str
    """The files' state the row is about (Markdown)."""
    actions: Tuple[Tuple[str, str], ...]
    """(role, :data:`REPAIRS` / :data:`REPORTS` / :data:`LEAVES`) for each role the row applies to."""
    does: str
    """What the guard does there (Markdown)."""
    why: str
    """Why that and not more (Markdown)."""
    sources: Tuple[Source, ...]

    def action(self, role: str) -> str:
        """What the guard does on ``role`` (:data:`LEAVES` where the row does not apply)."""
        return dict(self.actions).get(role, LEAVES)


AWS_TOPOLOGY = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-topology.html"
SCHEDMD_CONFIGLESS = "https://slurm.schedmd.com/configless_slurm.html"
PASK_14 = "https://github.com/aws-samples/sample-physical-ai-scaffolding-kit/pull/14"
PASK_23 = "https://github.com/aws-samples/sample-physical-ai-scaffolding-kit/pull/23"
PASK_5 = "https://github.com/aws-samples/sample-physical-ai-scaffolding-kit/issues/5"
ADT_1207 = "https://github.com/awslabs/awsome-distributed-ai/issues/1207"
ADT_1218 = "https://github.com/awslabs/awsome-distributed-ai/pull/1218"
PC_3122 = "https://github.com/aws/aws-parallelcluster-cookbook/pull/3122"

FLAT_DEFAULT = Source(
    AWS_TOPOLOGY,
    "Partitions that contain instance types without network topology support inherit a cluster-wide `flat` "
    "default, which keeps their nodes schedulable.",
)
CONFIGLESS_SHIPS = Source(
    SCHEDMD_CONFIGLESS,
    'If any of the supported config files "Include" additional config files, the Included configs will ONLY be '
    'shipped if their "Include" filename reference has no path separators and the file is located adjacent to '
    "slurm.conf. Any additional config files will need to be shared a different way or added to the parent config.",
)

RULES: Tuple[Rule, ...] = (
    Rule(
        TOPOLOGY_TREE,
        "slurm.conf sets `TopologyPlugin=topology/tree`, there is no `topology.yaml`, and `topology.conf` is missing "
        "or names no switch",
        ((CONTROLLER, REPAIRS),),
        "writes `topology.conf` with one switch over every `NodeName` of slurm.conf (a flat tree), marked as the "
        "guard's, then `scontrol reconfigure`; rewrites its own file when nodes join or leave",
        "without a tree `sbatch` is refused and a reconfigure leaves slurmctld deaf for up to 60 s (seen on 24.11); "
        "one switch over every node is the flat default HyperPod itself gives nodes without topology. A "
        "`topology.conf` with a switch is HyperPod's tree and is never touched, and HyperPod's next file replaces "
        "the guard's",
        (
            Source(
                PASK_14,
                "A fresh HyperPod deployment with a GPU worker can enable `TopologyPlugin=topology/tree` without a "
                "corresponding `topology.conf` on the Slurm controller. In that state, Slurm rejects job "
                "submissions",
            ),
            FLAT_DEFAULT,
        ),
    ),
    Rule(
        TOPOLOGY_YAML,
        "Slurm 25.05 and later: `topology.yaml` exists with no topology in it while slurm.conf names one (a "
        "`TopologyPlugin`, or a partition's `Topology=`)",
        ((CONTROLLER, REPAIRS),),
        "writes `topology.yaml` with one `flat` topology for each name the partitions' `Topology=` give (the "
        "first the cluster default; `default` when none does), marked as the guard's, then `scontrol reconfigure`; "
        "slurm.conf is not edited",
        "on Slurm 25.11 this state crash-loops slurmctld; `flat` is HyperPod's own default for nodes without "
        "topology. A `topology.yaml` with a topology in it is HyperPod's source of truth and is never touched",
        (
            Source(
                PASK_23,
                "Observed on the Slurm 25.11 AMI with a GPU worker group: `$SLURM_DIR/etc` contains an empty "
                "`topology.yaml` (`[]`) + empty `topology.conf`, and the GPU `PartitionName` carries a "
                "`Topology=tree` tag; with that config slurmctld crash-loops on SIGSEGV",
            ),
            Source(
                AWS_TOPOLOGY,
                "On Slurm 25.11 and later, topology is defined in a `topology.yaml` file, which is the source of truth",
            ),
            FLAT_DEFAULT,
        ),
    ),
    Rule(
        TOPOLOGY_BLOCK,
        "slurm.conf sets `TopologyPlugin=topology/block`, there is no `topology.yaml`, and `topology.conf` is "
        "missing or names no block",
        ((CONTROLLER, REPORTS),),
        "reports it (log line, metric, alarm)",
        "a block has no flat stand-in: blocks have sizes and only nodes in blocks are schedulable, so a made-up "
        "block would schedule jobs on an NVLink domain that is not there",
        (
            Source(
                AWS_TOPOLOGY,
                "Only nodes listed in blocks are schedulable by Slurm. Every block must have at least "
                "`BlockSizes[0]` nodes.",
            ),
        ),
    ),
    Rule(
        BLOCK_POWER_DOWN,
        "Slurm 25.11 with block topology and power saving (`SuspendTime` set): nodes that power down drop out of "
        "their blocks",
        ((CONTROLLER, REPORTS),),
        "reports it",
        "the workaround (`Topology=default:<BlockName>` on each `NodeName` line) edits the node lines HyperPod "
        "writes and rewrites; the fix is Slurm's",
        (
            Source(
                PC_3122,
                "Workaround for Slurm 25.11.2 bug where topology_p_add_rm_node incorrectly removes nodes from "
                "topology blocks when they enter power-down state.",
            ),
        ),
    ),
    Rule(
        TOPOLOGY_CHOSEN,
        "`TopologyPlugin=topology/flat` or `topology/default`, no `TopologyPlugin`, or a topology file with a switch, "
        "a block or a topology in it",
        tuple((role, LEAVES) for role in ALL_ROLES),
        "nothing",
        "the operator's or HyperPod's choice: AWS documents setting the plugin by hand, and HyperPod reconciles "
        "its files as the cluster changes",
        (
            Source(
                AWS_TOPOLOGY,
                "To disable topology-aware placement, set the plugin to `topology/flat` (or `topology/default`)",
            ),
            Source(
                AWS_TOPOLOGY,
                "As the cluster evolves through scaling operations or node replacements, HyperPod continuously "
                "reconciles the topology configuration to reflect the current cluster state.",
            ),
        ),
    ),
    Rule(
        PYXIS_TWICE,
        "two uncommented lines reached from `plugstack.conf` load `spank_pyxis.so` (the AMI's and a lifecycle "
        "script's)",
        ((CONTROLLER, REPAIRS), (LOGIN, REPORTS), (COMPUTE, REPORTS)),
        "on the controller, comments out each later registration in `plugstack.conf` (a direct line, or the "
        "`include` of a file that loads nothing but Pyxis), keeping the first, then `scontrol reconfigure`; on login "
        "and compute nodes reports it (their copy is slurmd's, from the controller)",
        "every `srun`/`sbatch` warns once per Pyxis option. The first registration is the one Slurm loaded; a "
        "registration inside a file that also loads other plugins is reported, not edited",
        (
            Source(ADT_1207, "Every `sbatch`/`srun` prints one warning per pyxis option"),
            Source(
                ADT_1218,
                'srun: spank: option "container-image" provided by both spank_pyxis.so and spank_pyxis.so',
            ),
        ),
    ),
    Rule(
        CONFIGLESS_INCLUDE,
        "slurm.conf sets `SlurmctldParameters=enable_configless` and `plugstack.conf` includes a file by a path "
        "(a `/` in the name)",
        ((CONTROLLER, REPAIRS),),
        "copies the included lines into `plugstack.conf` between guard markers (refreshed when the file changes), "
        "then `scontrol reconfigure`",
        "slurmctld does not send such a file to configless nodes; copying its lines into the parent is SchedMD's "
        "documented way",
        (CONFIGLESS_SHIPS,),
    ),
    Rule(
        CONFIGLESS_MISSING,
        "the `plugstack.conf` slurmd received from the controller includes a file this node does not have",
        ((LOGIN, REPORTS), (COMPUTE, REPORTS)),
        "reports it",
        "what the file loads (Pyxis) is silently not loaded here; slurmd's copy is the controller's to fix (its "
        "guard copies such includes into `plugstack.conf`)",
        (
            Source(
                PASK_5,
                "The `--container-image` directive is silently ignored. Jobs run directly on the host OS instead "
                "of inside the container.",
            ),
            CONFIGLESS_SHIPS,
        ),
    ),
    Rule(
        INCLUDE_ADJACENT,
        "`plugstack.conf` includes a file by a bare name, next to slurm.conf",
        tuple((role, LEAVES) for role in ALL_ROLES),
        "nothing",
        "slurmctld sends such a file with `plugstack.conf`",
        (CONFIGLESS_SHIPS,),
    ),
    Rule(
        FIGHT,
        "a file the guard has repaired {} times within an hour is broken again".format(FIGHT_LIMIT),
        ((CONTROLLER, REPORTS),),
        "stops repairing that file for the hour and reports it",
        "something (HyperPod's agent, a script) keeps writing it that way on purpose; the guard does not fight it",
        (
            Source(
                AWS_TOPOLOGY,
                "manual changes may be overwritten by HyperPod during subsequent cluster updates, including scaling "
                "operations, node replacements, and other cluster lifecycle events",
            ),
        ),
    ),
)

BY_CHECK: Dict[str, Rule] = {rule.check: rule for rule in RULES}
CHECKS = tuple(rule.check for rule in RULES if any(action != LEAVES for _, action in rule.actions))
"""The checks that can find something (the metric's ``check`` label values)."""


def repairs(check: str, role: str) -> bool:
    """Whether the guard repairs ``check`` on ``role`` (the table's word, used by the service)."""
    return BY_CHECK[check].action(role) == REPAIRS


def markdown_table() -> str:
    """The table as docs/node-runtime.md shows it: one row per :data:`RULES` entry."""
    lines = [
        "| Check | State of the files | Controller | Login | Compute | What the guard does | Why | Source |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rule in RULES:
        sources = "<br>".join('[{}]({}): "{}"'.format(_label(s.url), s.url, s.quote) for s in rule.sources)
        cells = [
            "`{}`".format(rule.check),
            rule.state,
            *(rule.action(role) for role in ALL_ROLES),
            rule.does,
            rule.why,
            sources,
        ]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def _label(url: str) -> str:
    """A short name for a source link: ``owner/repo#N``, or the page's file name."""
    parts = url.split("/")
    if "github.com" in url and len(parts) >= 7:
        return "{}/{}#{}".format(parts[3], parts[4], parts[6])
    return parts[-1]
