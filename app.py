"""The deployable app: ``cdk synth``/``cdk deploy`` [-c config=PATH] [-c stack_name=NAME].

Without ``-c config`` it synthesizes the default cluster (ClusterConfig's defaults).
"""

import sys

import aws_cdk as cdk

from hyperpod_cdk import ClusterConfig, ConfigurationError, TrainingClusterStack, load_config


def main() -> None:
    app = cdk.App()
    config_path = app.node.try_get_context("config")
    try:
        config = load_config(config_path) if config_path else ClusterConfig()
        stack_name = app.node.try_get_context("stack_name") or f"hyperpod-{config.cluster_name}"
        TrainingClusterStack(app, stack_name, config=config)
    except ConfigurationError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    app.synth()


if __name__ == "__main__":
    main()
