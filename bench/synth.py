"""Synthesis benchmark: whole-process `python app.py` wall time, template size, growth with instance groups.

Run in the repo root: ``.venv/bin/python bench/synth.py`` (or ``make bench``). Prints a Markdown report and
writes it to bench/results/synth.md. Timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hyperpod_cdk import ClusterConfig

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "synth.md"
GROUP_SIZES = (2, 10, 50, 100)
"""Instance groups per cluster: 1 controller + N-1 compute (a cluster needs both; 100 is the maximum)."""

BARE_APP = """\
import aws_cdk as cdk
from aws_cdk import aws_s3 as s3

app = cdk.App()
s3.Bucket(cdk.Stack(app, "Bare"), "Bucket")
app.synth()
"""


@dataclass(frozen=True)
class App:
    """A CDK app run as ``python <script>``, optionally with CDK context (passed as CDK_CONTEXT_JSON)."""

    label: str
    script: Path
    context: dict[str, str] | None = None


@dataclass(frozen=True)
class Template:
    """The one stack template an app synthesized."""

    stack: str
    size_bytes: int
    resources: int


@dataclass(frozen=True)
class Timing:
    """Wall times of repeated runs of one app, with the template of the last run."""

    seconds: list[float]
    template: Template

    @property
    def median(self) -> float:
        """Median wall time in seconds."""
        return statistics.median(self.seconds)

    def spread(self) -> str:
        """The fastest and slowest run, as ``[min, max]`` seconds."""
        return f"[{min(self.seconds):.2f}, {max(self.seconds):.2f}]"


def log(message: str) -> None:
    """Progress on stderr, so stdout carries only the report."""
    print(message, file=sys.stderr, flush=True)


def child_env(outdir: Path, *, validation: bool, context: dict[str, str] | None) -> dict[str, str]:
    """The environment of one synth: our own, plus the outdir, validator switch and context."""
    env = {k: v for k, v in os.environ.items() if k not in ("CDK_VALIDATION", "CDK_CONTEXT_JSON")}
    env["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"
    env["CDK_OUTDIR"] = str(outdir)
    if not validation:
        env["CDK_VALIDATION"] = "false"
    if context is not None:
        env["CDK_CONTEXT_JSON"] = json.dumps(context)
    return env


def read_template(outdir: Path) -> Template:
    """Size and resource count of the single *.template.json in a cloud assembly."""
    (path,) = outdir.glob("*.template.json")
    resources = json.loads(path.read_text())["Resources"]
    return Template(path.name.removesuffix(".template.json"), path.stat().st_size, len(resources))


def synth_once(app: App, workdir: Path, *, validation: bool) -> tuple[float, Template]:
    """Synthesize ``app`` into a fresh outdir as a whole process; return its wall time and template."""
    outdir = Path(tempfile.mkdtemp(prefix="cdk.out-", dir=workdir))
    env = child_env(outdir, validation=validation, context=app.context)
    command = [sys.executable, str(app.script)]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"{app.label}: exit {result.returncode}\n{result.stderr}")
    template = read_template(outdir)
    shutil.rmtree(outdir)
    return seconds, template


def compare(apps: Sequence[App], runs: int, workdir: Path, *, validation: bool) -> list[Timing]:
    """Run the apps interleaved (a, b, a, b, ...) ``runs`` times each; one Timing per app."""
    seconds: list[list[float]] = [[] for _ in apps]
    templates: list[Template] = []
    for run in range(runs):
        templates = []
        for index, app in enumerate(apps):
            log(f"  validator {'on' if validation else 'off'}: {app.label} run {run + 1}/{runs}")
            elapsed, template = synth_once(app, workdir, validation=validation)
            seconds[index].append(elapsed)
            templates.append(template)
    return [Timing(s, t) for s, t in zip(seconds, templates, strict=True)]


def cluster_config(groups: int) -> ClusterConfig:
    """The default cluster with ``groups`` instance groups: 1 controller and ``groups - 1`` compute groups."""
    from hyperpod_cdk import ClusterConfig, InstanceGroup, NodeRole  # starts Node (jsii): only when needed

    controller = InstanceGroup(name="controller", role=NodeRole.CONTROLLER, instance_type="ml.m5.xlarge", count=1)
    compute = [InstanceGroup(name=f"compute-{i}", instance_type="ml.c5.4xlarge", count=2) for i in range(1, groups)]
    return ClusterConfig(cluster_name=f"bench-{groups}", instance_groups=[controller, *compute])


def growth_app(groups: int, workdir: Path) -> App:
    """app.py pointed (through context) at a JSON config file with ``groups`` instance groups."""
    path = workdir / f"cluster-{groups}.json"
    path.write_text(json.dumps(cluster_config(groups).model_dump(mode="json", exclude_defaults=True)))
    return App(f"{groups} groups", ROOT / "app.py", {"config": str(path)})


def command_line() -> str:
    """The command that is running, with paths relative to the repo root where possible."""

    def short(path: str) -> str:
        absolute = Path(path).absolute()
        return str(absolute.relative_to(ROOT)) if absolute.is_relative_to(ROOT) else path

    return shlex.join([short(sys.executable), short(sys.argv[0]), *sys.argv[1:]])


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what platform knows."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    models = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return models[0] if models else platform.processor() or "unknown CPU"


def machine() -> str:
    """nproc, CPU model and the Python, Node and aws-cdk-lib versions."""
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    return (
        f"nproc {len(os.sched_getaffinity(0))} ({cpu_model()}), {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, Node {node}, aws-cdk-lib {version('aws-cdk-lib')}"
    )


def row(*cells: object) -> str:
    """One Markdown table row."""
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def table(header: Sequence[str], rows: Sequence[str], left: int = 1) -> list[str]:
    """A Markdown table whose first ``left`` columns are left-aligned and the rest (numbers) right-aligned."""
    separator = row(*(["---"] * left + ["--:"] * (len(header) - left)))
    return [row(*header), separator, *rows]


def comparison_section(on: list[Timing], off: list[Timing], runs: int) -> list[str]:
    """Default app vs bare app, with the validator on and off."""
    rows = []
    for label, (bare, default) in (("on (default)", on), ("off (`CDK_VALIDATION=false`)", off)):
        rows.append(
            row(
                label,
                f"{bare.median:.2f} {bare.spread()}",
                f"{default.median:.2f} {default.spread()}",
                f"**{default.median / bare.median:.2f}x**",
            )
        )
    header = [
        "Built-in validator",
        "Bare app: median s [min, max]",
        "Default app: median s [min, max]",
        "Default / bare",
    ]
    return [
        "## Default app vs a bare app",
        "",
        f"Whole-process wall time of `python app.py` (the default cluster) and of a one-bucket app "
        f"(`s3.Bucket` in one `Stack`): {runs} runs each, interleaved (bare, default, ...), a fresh "
        "`CDK_OUTDIR` per run, after one untimed warm-up run of each.",
        "",
        *table(header, rows),
        "",
        f"Validator cost (median on - off): bare app {on[0].median - off[0].median:.2f} s, "
        f"default app {on[1].median - off[1].median:.2f} s.",
    ]


def template_section(default: Template, bare: Template) -> list[str]:
    """Template size and resource count of the default and bare apps."""
    rows = [
        row(label, f"`{t.stack}`", f"{t.size_bytes:,}", t.resources)
        for label, t in (("Default app", default), ("Bare app", bare))
    ]
    return [
        "## Templates",
        "",
        "Bytes of `<stack>.template.json` as CDK writes it; resources: entries under `Resources`.",
        "",
        *table(["App", "Stack", "Template bytes", "Resources"], rows, left=2),
    ]


def growth_section(sizes: Sequence[int], timings: list[Timing], runs: int) -> list[str]:
    """Synth time, template bytes and resources per cluster size, as ratios to the smallest."""
    base = timings[0]
    rows = [
        row(
            f"{n} (1 controller + {n - 1} compute)",
            f"{t.median:.2f} {t.spread()}",
            f"{t.median / base.median:.2f}x",
            f"{t.template.size_bytes:,}",
            f"{t.template.size_bytes / base.template.size_bytes:.2f}x",
            t.template.resources,
            f"{t.template.resources / base.template.resources:.2f}x",
        )
        for n, t in zip(sizes, timings, strict=True)
    ]
    header = [
        "Instance groups",
        "Median s [min, max]",
        "Time x",
        "Template bytes",
        "Bytes x",
        "Resources",
        "Resources x",
    ]
    last, added = timings[-1], sizes[-1] - sizes[0]
    return [
        "## Growth with instance groups",
        "",
        '"Instance groups" counts every group of the cluster: 1 controller + N-1 compute groups '
        f"(`ml.c5.4xlarge`, count 2 each). A cluster needs at least one of each, so the smallest has {sizes[0]}; "
        f"{sizes[-1]} is the most a cluster may have. Everything else is the default cluster. Each config is "
        "a JSON file passed to `python app.py` as context (`CDK_CONTEXT_JSON`); validator off, "
        f"{runs} runs per size, interleaved across sizes. Ratios are to the {sizes[0]}-group cluster.",
        "",
        *table(header, rows),
        "",
        f"Per added group ({sizes[0]} to {sizes[-1]} groups): "
        f"{(last.template.size_bytes - base.template.size_bytes) / added:,.0f} template bytes, "
        f"{(last.template.resources - base.template.resources) / added:.2f} resources, "
        f"{(last.median - base.median) / added * 1000:.1f} ms of synth time.",
    ]


def parse_args() -> argparse.Namespace:
    """The command-line options (run counts and where to write the report)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5, help="runs per app in the comparison (default 5)")
    parser.add_argument("--growth-runs", type=int, default=3, help="runs per cluster size (default 3)")
    parser.add_argument("--output", type=Path, default=RESULTS, help="where to write the report too")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    started, load = time.perf_counter(), os.getloadavg()[0]
    os.environ["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"  # for our own import of aws_cdk too
    with tempfile.TemporaryDirectory(prefix="hyperpod-bench-") as tmp:
        workdir = Path(tmp)
        growth_apps = [growth_app(n, workdir) for n in GROUP_SIZES]  # before timing: it starts Node here
        bare_script = workdir / "bare_app.py"
        bare_script.write_text(BARE_APP)
        apps = [App("bare app", bare_script), App("default app", ROOT / "app.py")]
        log("warm-up")
        for app in apps:
            synth_once(app, workdir, validation=True)
        log("default vs bare")
        on = compare(apps, args.runs, workdir, validation=True)
        off = compare(apps, args.runs, workdir, validation=False)
        log("growth")
        growth = compare(growth_apps, args.growth_runs, workdir, validation=False)
    total = time.perf_counter() - started
    lines = [
        "# Synthesis benchmark (bench/synth.py)",
        "",
        f"- Command (in the repo root): `{command_line()}`",
        f"- Machine: {machine()}; 1-minute load average at start {load:.2f}",
        f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; total script runtime {total:.0f} s",
        "",
        *comparison_section(on, off, args.runs),
        "",
        *template_section(off[1].template, off[0].template),
        "",
        *growth_section(GROUP_SIZES, growth, args.growth_runs),
    ]
    report = "\n".join(lines) + "\n"
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    sys.stdout.write(report)


if __name__ == "__main__":
    main()
