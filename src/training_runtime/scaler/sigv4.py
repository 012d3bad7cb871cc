"""AWS Signature Version 4 for one request (stdlib ``hmac``/``hashlib``): what the scaler's SageMaker client signs
with. AWS: "Create a signed AWS API request" (IAM user guide, reference_sigv-create-signed-request.html).

Every header the request carries is signed (names lower-cased, values trimmed and inner spaces folded), plus
``host``, ``x-amz-date`` and, with temporary credentials, ``x-amz-security-token``; the payload's SHA-256 is part
of the canonical request. The test suite checks the result against botocore's signer on fixed inputs.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import urllib.parse
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED = ("expect", "user-agent", "x-amzn-trace-id", "authorization")
"""Headers left out of the signature (as AWS's SDKs do: proxies may change them)."""


class CredentialsError(RuntimeError):
    """No credentials to sign with (the metadata service did not give the instance role's): the client turns it into
    an :class:`~training_runtime.scaler.sagemaker.ApiError` of kind ``credentials``, so the scaler backs off and
    reports it like any failed call."""


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str = ""
    token: Optional[str] = None
    expires: Optional[float] = None
    """Epoch seconds when temporary credentials expire (None: never)."""

    def __repr__(self) -> str:  # never log a secret
        return "Credentials(access_key={!r}, expires={!r})".format(self.access_key, self.expires)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def _host(url: urllib.parse.SplitResult) -> str:
    host = url.hostname or ""
    if ":" in host:
        host = "[" + host + "]"
    default = {"http": 80, "https": 443}.get(url.scheme)
    if url.port is not None and url.port != default:
        return "{}:{}".format(host, url.port)
    return host


def _canonical_path(path: str) -> str:
    return urllib.parse.quote(path or "/", safe="/~")


def _canonical_query(query: str) -> str:
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    quoted = sorted((urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~")) for k, v in pairs)
    return "&".join("{}={}".format(k, v) for k, v in quoted)


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = _hmac(("AWS4" + secret).encode("utf-8"), date)
    key = _hmac(key, region)
    key = _hmac(key, service)
    return _hmac(key, "aws4_request")


def canonical_request(method: str, url: str, headers: Mapping[str, str], body: bytes) -> Tuple[str, str]:
    """(the canonical request, the signed header names joined by ``;``)."""
    parts = urllib.parse.urlsplit(url)
    signed: Dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower().strip()
        if key in UNSIGNED:
            continue
        signed[key] = " ".join(str(value).split())
    names = ";".join(sorted(signed))
    lines = [
        method.upper(),
        _canonical_path(parts.path),
        _canonical_query(parts.query),
        "".join("{}:{}\n".format(k, signed[k]) for k in sorted(signed)),
        names,
        hashlib.sha256(body).hexdigest(),
    ]
    return "\n".join(lines), names


def sign(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: Credentials,
    region: str,
    service: str,
    now: datetime.datetime,
) -> Dict[str, str]:
    """The request's headers with ``Host``, ``X-Amz-Date``, ``X-Amz-Security-Token`` (temporary credentials) and
    ``Authorization`` added. ``now`` is UTC (injected: the signature covers it)."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    date = stamp[:8]
    out = {k: v for k, v in headers.items() if k.lower() not in ("host", "x-amz-date", "authorization")}
    out["Host"] = _host(urllib.parse.urlsplit(url))
    out["X-Amz-Date"] = stamp
    if credentials.token:
        out["X-Amz-Security-Token"] = credentials.token
    request, names = canonical_request(method, url, out, body)
    scope = "{}/{}/{}/aws4_request".format(date, region, service)
    to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(request.encode("utf-8")).hexdigest()])
    signature = hmac.new(
        signing_key(credentials.secret_key, date, region, service), to_sign.encode("utf-8"), hashlib.sha256
    ).hexdigest()
    out["Authorization"] = "{} Credential={}/{}, SignedHeaders={}, Signature={}".format(
        ALGORITHM, credentials.access_key, scope, names, signature
    )
    return out
