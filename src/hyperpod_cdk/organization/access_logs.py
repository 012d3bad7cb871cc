"""S3 server access logs of every bucket, to one bucket and prefix the organization owns."""

from __future__ import annotations

from collections.abc import Callable

import jsii
from aws_cdk import IAspect
from aws_cdk import aws_s3 as s3
from constructs import IConstruct

from hyperpod_cdk.constructs.scanners import MISSING_ACCESS_LOGS, unskip_checkov


@jsii.implements(IAspect)
class AccessLogs:
    """``LoggingConfiguration`` on every bucket but the log bucket itself."""

    def __init__(self, bucket_name: str, prefix: str, is_log_bucket: Callable[[s3.CfnBucket], bool]) -> None:
        self.bucket_name = bucket_name
        self.prefix = prefix
        self._is_log_bucket = is_log_bucket

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, s3.CfnBucket) and not self._is_log_bucket(node):
            node.logging_configuration = s3.CfnBucket.LoggingConfigurationProperty(
                destination_bucket_name=self.bucket_name, log_file_prefix=self.prefix or None
            )
            unskip_checkov(node, MISSING_ACCESS_LOGS)
