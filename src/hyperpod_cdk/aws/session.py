"""The boto3 session of a command: the standard AWS settings, with ``--profile``/``--region`` first."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import boto3


def make_session(profile: str | None, region: str | None) -> boto3.session.Session:
    """A boto3 Session: --profile / --region first, then AWS_PROFILE and AWS_REGION (which botocore alone does
    not read; it reads AWS_DEFAULT_REGION), then the config files. AWS_ENDPOINT_URL is botocore's own."""
    import boto3

    return boto3.session.Session(profile_name=profile, region_name=region or os.environ.get("AWS_REGION") or None)
