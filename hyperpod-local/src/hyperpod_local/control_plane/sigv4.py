"""Signature Version 4 checks: each request must be signed, for the ``sagemaker`` service, by a key the
emulated instance metadata service hands out (the instance role's credentials) or the host's copy of them.

The signature is recomputed with botocore's own signer over the headers the request says it signed, and
compared. Errors are AWS's (AWS General Reference, "Signature Version 4 signing" and the common errors of the
API reference, https://docs.aws.amazon.com/sagemaker/latest/APIReference/CommonErrors.html):
``MissingAuthenticationTokenException`` (no signature), ``UnrecognizedClientException`` (an unknown access
key or session token), ``IncompleteSignatureException`` (a request whose signature leaves out the ``host`` or
``x-amz-target`` header, or the session token: the operation or the endpoint could be changed without breaking
it), ``InvalidSignatureException`` (a signature that does not match, a credential scoped to another Region than
the endpoint's, "Credential should be scoped to a valid region", or a request signed more than 5 minutes from now:
"Signature expired").
"""

from __future__ import annotations

import calendar
import hmac
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from hyperpod_local.control_plane.model import ApiError

SERVICE = "sagemaker"
MAX_SKEW_S = 300.0
MUST_SIGN = ("host", "x-amz-target")
"""Headers every request must sign: the endpoint it was meant for and the operation it calls."""
AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request,"
    r"\s*SignedHeaders=(?P<signed>[^,]+),\s*Signature=(?P<signature>[0-9a-f]{64})"
)


@dataclass(frozen=True)
class Key:
    access_key: str
    secret_key: str
    token: str | None = None


def forbidden(code: str, message: str) -> ApiError:
    return ApiError(code, message, 403)


def verify(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    keys: Callable[[], Iterable[Key]],
    region: str,
    clock: Callable[[], float] = time.time,
    service: str = SERVICE,
) -> Key:
    """The key that signed the request for ``service`` in ``region``; raises AWS's error when none did."""
    lower = {k.lower(): v for k, v in headers.items()}
    found = AUTHORIZATION.fullmatch(lower.get("authorization", "").strip())
    if not found:
        raise forbidden("MissingAuthenticationTokenException", "Missing Authentication Token")
    key = next((k for k in keys() if k.access_key == found["key"]), None)
    if key is None or (key.token or None) != (lower.get("x-amz-security-token") or None):
        raise forbidden("UnrecognizedClientException", "The security token included in the request is invalid.")
    stamp = lower.get("x-amz-date", "")
    try:
        signed_at = calendar.timegm(time.strptime(stamp, "%Y%m%dT%H%M%SZ"))
    except ValueError:
        raise forbidden("IncompleteSignatureException", "X-Amz-Date is missing or not yyyyMMddTHHmmssZ") from None
    if abs(clock() - signed_at) > MAX_SKEW_S or not stamp.startswith(found["date"]):
        raise forbidden("InvalidSignatureException", f"Signature expired: {stamp} is not within 5 minutes of now")
    if found["region"] != region:
        raise forbidden(
            "InvalidSignatureException", f"Credential should be scoped to a valid region, not '{found['region']}'."
        )
    names = found["signed"].split(";")
    unsigned = [n for n in MUST_SIGN + (("x-amz-security-token",) if key.token else ()) if n not in names]
    if unsigned:
        raise forbidden(
            "IncompleteSignatureException",
            f"'{unsigned[0]}' must be a 'SignedHeader' in the AWS Authorization (SignedHeaders: {found['signed']}).",
        )
    request = AWSRequest(method=method, url=url, data=body, headers={n: lower.get(n, "") for n in names})
    request.context["timestamp"] = stamp
    signer = SigV4Auth(Credentials(key.access_key, key.secret_key, key.token), found["service"], found["region"])
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if found["service"] != service or not hmac.compare_digest(expected, found["signature"]):
        raise forbidden(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
            "Access Key and signing method. Consult the service documentation for details.",
        )
    return key
