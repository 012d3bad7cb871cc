"""Synthesis for publishing: an app (a config file's published stack, or any ``build(app)``) into a cloud
assembly in a directory, checked by CDK's built-in template validator like ``app.py`` checks a deploy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hyperpod_cdk.core.errors import ConfigurationError
from hyperpod_cdk.core.published_layout import PublishTarget

if TYPE_CHECKING:
    import aws_cdk as cdk

BuildApp = Callable[["cdk.App"], object]
"""Adds the stacks to publish to the app (e.g. an example's ``build``)."""


def config_stacks(
    config_path: str | Path, target: PublishTarget, *, stack_name: str | None = None, region: str | None = None
) -> BuildApp:
    """Builds the config file's cluster as one :class:`PublishedTrainingClusterStack` (the config is read and
    checked now, so its problems are reported before any synthesis)."""
    from hyperpod_cdk.core.config import load_config
    from hyperpod_cdk.core.deployment import deployment

    config = load_config(config_path, region=region)
    name = stack_name or deployment(config).stack_name

    def build(app: cdk.App) -> object:
        import aws_cdk as cdk

        from hyperpod_cdk.stacks import PublishedTrainingClusterStack

        return PublishedTrainingClusterStack(
            app,
            name,
            config=config,
            target=publish_target(app, target),  # the bucket's owner, once publish has checked it
            env=cdk.Environment(region=region) if region else None,
        )

    return build


PUBLISH_CONTEXT = ("publish_bucket", "publish_prefix", "publish_bucket_owner")
"""The context keys through which a Python app learns the platform bucket and prefix it is published to, and the
account that owns the bucket."""


def publish_target(app: cdk.App, default: PublishTarget) -> PublishTarget:
    """The target ``publish`` gave an app through :data:`PUBLISH_CONTEXT`, else ``default`` (a plain synth)."""
    bucket, prefix, owner = (app.node.try_get_context(key) for key in PUBLISH_CONTEXT)
    return PublishTarget(
        bucket or default.bucket_name,
        prefix if prefix is not None else default.prefix,
        owner or default.bucket_owner,
    )


def app_stacks(app_path: str | Path, target: PublishTarget) -> BuildApp:
    """A Python app file's ``build(app)`` (as the examples define it), given the target through the context
    keys :data:`PUBLISH_CONTEXT`, so its stacks can point at where ``publish`` puts their files."""
    import importlib.util

    path = Path(app_path)
    spec = importlib.util.spec_from_file_location(f"published_app_{path.stem}", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ConfigurationError(str(path), [f"{path}: not a Python file. Fix: give a config file or an app file"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    app_build = getattr(module, "build", None)
    if not callable(app_build):
        raise ConfigurationError(
            str(path), [f"{path}: has no build(app) function. Fix: define build(app) that adds the stacks to publish"]
        )

    def build(app: cdk.App) -> object:
        app.node.set_context(PUBLISH_CONTEXT[0], target.bucket_name)
        app.node.set_context(PUBLISH_CONTEXT[1], target.prefix)
        if target.bucket_owner is not None:
            app.node.set_context(PUBLISH_CONTEXT[2], target.bucket_owner)
        return app_build(app)

    return build


def synthesize(build: BuildApp, outdir: Path, *, source: str, context: dict[str, str] | None = None) -> Path:
    """The cloud assembly of ``build``'s app (its context: ``context``) in ``outdir``. Raises
    :class:`ConfigurationError` for every finding of CDK's built-in template validator, each named by config field
    where one is known."""
    import aws_cdk as cdk

    from hyperpod_cdk.core.template_findings import findings_in

    app = cdk.App(outdir=str(outdir), context=context)
    build(app)
    assembly = app.synth()
    problems = findings_in(assembly.directory)
    if problems:
        raise ConfigurationError(f"{source}: CDK's template validator", problems)
    return Path(assembly.directory)
