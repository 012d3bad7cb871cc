"""What the directory step reads from AWS with the node's instance role: a secret's value and an S3 object.

``GetSecretValue`` speaks AWS's JSON 1.1 protocol (``POST /``, ``X-Amz-Target: secretsmanager.GetSecretValue``,
signing name ``secretsmanager``; botocore's model ``secretsmanager/2017-10-17``), through the same SigV4 client as the
scaler (:class:`training_runtime.scaler.sagemaker.AwsJsonClient`); the REST API's key is read with the same client
(:mod:`training_runtime.rest.secret`). The endpoint is AWS's regional one
(``https://secretsmanager.<region>.amazonaws.com``, AWS General Reference "AWS Secrets Manager endpoints and quotas")
unless the local cluster's emulation names its control plane. The value is returned to the caller and never logged:
errors name the secret's ARN and AWS's error code only. Stdlib only (Python 3.8+).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Callable, Optional, Tuple

from training_runtime.scaler.sagemaker import ApiError, AwsJsonClient
from training_runtime.scaler.sigv4 import Credentials, sign

SECRETS_SERVICE = "secretsmanager"
S3_TIMEOUT_S = 30.0
MAX_OBJECT = 1 << 20
"""A CA bundle is a few kilobytes; an object above 1 MiB is not one."""


class SecretError(RuntimeError):
    """A secret or object could not be read or written; the message never holds its value. ``code``: AWS's error
    code, where AWS answered with one."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class SecretsManager(AwsJsonClient):
    """Secrets Manager's JSON API (target prefix ``secretsmanager.``, SigV4 service ``secretsmanager``)."""

    service = SECRETS_SERVICE
    target_prefix = "secretsmanager."

    def secret_string(self, arn: str) -> str:
        return self.current(arn)[0]

    def current(self, arn: str) -> Tuple[str, str]:
        """(``SecretString``, ``VersionId``) of the secret's ``AWSCURRENT`` version."""
        try:
            answer = self.call("GetSecretValue", {"SecretId": arn})
        except ApiError as error:
            raise SecretError("GetSecretValue {}: {} ({})".format(arn, error.code, error.kind), error.code) from None
        value = answer.get("SecretString")
        if not isinstance(value, str):
            raise SecretError("GetSecretValue {}: the secret has no SecretString (a binary secret?)".format(arn))
        return value, str(answer.get("VersionId") or "")

    def put_string(self, arn: str, value: str, token: str) -> str:
        """``PutSecretValue``: ``value`` as a new version whose ``VersionId`` is ``token`` (it becomes
        ``AWSCURRENT``); the version's id. A version with that token and another value already there:
        :class:`SecretError` with ``code`` ``ResourceExistsException`` (see :mod:`training_runtime.login_pool`)."""
        payload = {"SecretId": arn, "SecretString": value, "ClientRequestToken": token}
        try:
            answer = self.call("PutSecretValue", payload)
        except ApiError as error:
            raise SecretError("PutSecretValue {}: {} ({})".format(arn, error.code, error.kind), error.code) from None
        return str(answer.get("VersionId") or token)


def endpoint_for(region: str, override: Optional[str] = None) -> str:
    """Secrets Manager's regional endpoint (AWS General Reference, "AWS Secrets Manager endpoints and quotas"), or
    ``override`` (the local cluster's control plane)."""
    return override or "https://secretsmanager.{}.amazonaws.com/".format(region)


def password_of(secret_string: str, arn: str) -> str:
    """The password a secret holds: its value, or the ``password`` of a JSON object (RDS-style secrets); one line."""
    value = secret_string
    try:
        parsed = json.loads(secret_string)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        if not isinstance(parsed.get("password"), str):
            raise SecretError("secret {} is JSON without a 'password' string".format(arn))
        value = parsed["password"]
    value = value.strip("\n")
    if not value or "\n" in value or "\r" in value or value != value.strip():
        raise SecretError(
            "secret {}: the password is empty, spans lines or starts or ends with a space (sssd.conf holds it on "
            "one line, trimmed)".format(arn)
        )
    return value


def s3_object(
    bucket: str,
    key: str,
    region: str,
    credentials: Callable[[], Credentials],
    clock: Callable[[], float] = time.time,
    endpoint: Optional[str] = None,
) -> bytes:
    """``GetObject`` of ``s3://bucket/key`` from the regional virtual-hosted endpoint (S3 user guide, "Virtual
    hosting of buckets"), signed for ``s3`` with the empty payload's hash in ``x-amz-content-sha256``."""
    base = endpoint or "https://{}.s3.{}.amazonaws.com".format(bucket, region)
    url = base.rstrip("/") + "/" + urllib.parse.quote(key, safe="/~")
    now = datetime.datetime.fromtimestamp(clock(), tz=datetime.timezone.utc)
    headers = {"x-amz-content-sha256": hashlib.sha256(b"").hexdigest()}
    signed = sign("GET", url, headers, b"", credentials(), region, "s3", now)
    request = urllib.request.Request(url, method="GET", headers=signed)
    try:
        with urllib.request.urlopen(request, timeout=S3_TIMEOUT_S) as response:
            data = response.read(MAX_OBJECT + 1)
    except urllib.error.HTTPError as error:
        raise SecretError("GetObject s3://{}/{}: HTTP {}".format(bucket, key, error.code)) from None
    except (urllib.error.URLError, OSError) as error:
        raise SecretError("GetObject s3://{}/{}: {}".format(bucket, key, error)) from None
    if len(data) > MAX_OBJECT:
        raise SecretError("s3://{}/{}: larger than {} bytes; not a CA certificate".format(bucket, key, MAX_OBJECT))
    return bytes(data)
