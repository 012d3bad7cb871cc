"""Synthesis for publishing: an app (a config file's published stack, or any ``build(app)``) into a cloud
assembly in a directory, checked by CDK's built-in template validator like ``app.py`` checks a deploy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hyperpod_cdk.errors import ConfigurationError
from hyperpod_cdk.publishing.layout import PublishTarget

if TYPE_CHECKING:
    import aws_cdk as cdk

BuildApp = Callable[["cdk.App"], object]
"""Adds the stacks to publish to the app (e.g. an example's ``build``)."""


def config_stacks(
    config_path: str | Path, target: PublishTarget, *, stack_name: str | None = None, region: str | None = None
) -> BuildApp:
    """Builds the config file's cluster as one :class:`PublishedTrainingClusterStack` (the config is read and
    checked now, so its problems are reported before any synthesis)."""
    from hyperpod_cdk.config import load_config

    config = load_config(config_path, region=region)

    def build(app: cdk.App) -> object:
        import aws_cdk as cdk

        from hyperpod_cdk.stacks import PublishedTrainingClusterStack

        return PublishedTrainingClusterStack(
            app,
            stack_name or f"hyperpod-{config.cluster_name}",
            config=config,
            target=target,
            env=cdk.Environment(region=region) if region else None,
        )

    return build


def synthesize(build: BuildApp, outdir: Path, *, source: str) -> Path:
    """The cloud assembly of ``build``'s app in ``outdir``. Raises :class:`ConfigurationError` for every
    finding of CDK's built-in template validator, each named by config field where one is known."""
    import aws_cdk as cdk

    from hyperpod_cdk.template_findings import findings_in

    app = cdk.App(outdir=str(outdir))
    build(app)
    assembly = app.synth()
    problems = findings_in(assembly.directory)
    if problems:
        raise ConfigurationError(f"{source}: CDK's template validator", problems)
    return Path(assembly.directory)
