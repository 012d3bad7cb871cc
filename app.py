"""The deployable app: ``cdk synth``/``cdk deploy`` [-c config=PATH] [-c stack_name=NAME] [-c scaler_counts=config]
[-c execution_roles=config].

Without ``-c config`` it synthesizes the default cluster (ClusterConfig's defaults). Synth fails, naming
the config field, on any problem: our rules before any construct is built, and every finding of CDK's
built-in template validator afterwards.
"""

# ruff: noqa: E402
import gc
import sys

# A synth is one short process that builds ~100k objects (jsii proxies, pydantic models) and frees none of
# them before it exits: the cyclic collector only costs time here (measured in bench/synth.py).
gc.disable()

from hyperpod_cdk.core.node_banner import silence_node_end_of_life_banner

silence_node_end_of_life_banner()  # before aws_cdk starts Node.js (hyperpod_cdk.core.node_banner says why)

# isort: split
import aws_cdk as cdk

from hyperpod_cdk import ClusterConfig, ConfigurationError, TrainingClusterStack, load_config
from hyperpod_cdk.core.deployment import deployment
from hyperpod_cdk.core.template_findings import findings_in
from hyperpod_cdk.deployed.synth_context import cached_counts, cached_roles


def main() -> None:
    app = cdk.App()
    config_path = app.node.try_get_context("config")
    try:
        config = load_config(config_path) if config_path else ClusterConfig()
        deployed = deployment(config)  # its stack name; its cluster name, whose counts a scaled group keeps
        stack_name = app.node.try_get_context("stack_name") or deployed.stack_name
        # A scaled group keeps the deployed cluster's count (docs/scaler-cloudformation.md).
        counts = cached_counts(deployed, app.node.try_get_context)  # cached in cdk.context.json
        # A deployed group keeps its execution role, as AWS asks (docs/execution-roles.md); no credentials: not read.
        roles = cached_roles(deployed, app.node.try_get_context)  # cached in cdk.context.json
        TrainingClusterStack(app, stack_name, config=config, deployed_counts=counts, deployed_roles=roles)
    except ConfigurationError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    assembly = app.synth()
    problems = findings_in(assembly.directory)
    if problems:
        source = config_path or "the default configuration"
        print(f"error: {source}: CDK's template validator found {len(problems)} problem(s):", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem} [{problem.rule}]", file=sys.stderr)
        sys.exit(1)
    gc.freeze()  # the objects live until exit: spare the interpreter's teardown a collection over them


if __name__ == "__main__":
    main()
