"""Compliance: every example passes cdk-nag (AwsSolutions) and CDK's built-in validator in strict mode.

This is the one place the built-in validator runs (~5 s per synth); unit tests keep it off.
"""

from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import Validations
from cdk_nag import AwsSolutionsChecks

from support import EXAMPLES, STRICT_VALIDATION, build_example, validation_report

pytestmark = pytest.mark.compliance


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_nag_and_strict_validator_find_nothing(example: Path, tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path), context=STRICT_VALIDATION)
    build_example(example, app)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    try:
        app.synth()
    except RuntimeError as error:  # ValidationFailed: the report says why
        pytest.fail(f"{error}\n" + "\n".join(validation_report(tmp_path)))
    assert validation_report(tmp_path) == []


def test_nag_catches_an_unacknowledged_finding(tmp_path: Path) -> None:
    """The harness fails when something is wrong: an unencrypted, public-readable bucket is flagged."""
    from aws_cdk import aws_s3 as s3

    app = cdk.App(outdir=str(tmp_path), builtin_cloud_formation_validation=False)
    stack = cdk.Stack(app, "Bad")
    s3.Bucket(stack, "Plain")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert any("AwsSolutions-S10" in line for line in validation_report(tmp_path))


def test_strict_validator_catches_a_schema_error(tmp_path: Path) -> None:
    """The built-in validator runs in strict mode here: a schema violation fails synthesis."""
    from aws_cdk import aws_sagemaker as sagemaker

    app = cdk.App(outdir=str(tmp_path), context=STRICT_VALIDATION)
    stack = cdk.Stack(app, "Bad")
    sagemaker.CfnCluster(stack, "Cluster", cluster_name="-not-a-valid-name-", node_recovery="Automatic")
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert any("3031" in line for line in validation_report(tmp_path))
