"""A Python client of the cluster's Slurm REST API: tokens from the minting function, jobs over HTTPS.

In a notebook::

    from hyperpod_cdk.rest.client import SlurmRestClient
    slurm = SlurmRestClient.from_stack("hyperpod-ml-cluster")
    job_id = slurm.submit("#!/bin/bash\\nsrun hostname", partition="workers", nodes=2)

The endpoint, the certificate's name and the minting URL are the stack's outputs (``RestApiEndpoint``,
``RestApiTlsName``, ``RestApiTokenUrl``). A token is minted by a SigV4-signed POST (service ``lambda``) with the
caller's AWS credentials and reused until a minute before it expires. The requests are SchedMD's OpenAPI
``v0.0.42`` (data_parser/v0.0.42, served by slurmrestd 24.11 and still by 25.11 and 26.05: docs/rest-api.md);
tests validate every body against the specification Debian's slurmrestd 24.11 generates.
urllib3 (botocore's own HTTP library) carries the requests: TLS verified against ``tls_name``, the certificate's name,
while connecting to the load balancer's DNS name.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

import urllib3

from hyperpod_cdk.core import stack_outputs as out
from hyperpod_cdk.rest.minter.token import TokenError, claims

if TYPE_CHECKING:
    import boto3

API_VERSION = "v0.0.42"
TOKEN_HEADER = "X-SLURM-USER-TOKEN"
"""slurmrestd's auth/jwt header (the generated specification's ``securitySchemes.token``)."""
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
REFRESH_MARGIN_S = 60
INVALID_JOB_ID = 2017
"""``ESLURM_INVALID_JOB_ID``, "Invalid job id specified" (Slurm's slurm_errno.h)."""
TIMEOUT_S = 30.0


class RestApiError(Exception):
    """A refused or failed request: the HTTP status and Slurm's own errors (``errors[].description``)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Endpoints:
    """Where the REST API and the minting function are (a TrainingClusterStack's outputs)."""

    api_url: str
    """``https://<load balancer DNS name>:<port>``."""
    token_url: str
    """The minting function's URL."""
    tls_name: str | None = None
    """The name the API's certificate is for (the load balancer's DNS name is not on it); None: the URL's host."""

    @classmethod
    def of_outputs(cls, outputs: Mapping[str, str], stack: str) -> Endpoints:
        missing = [k for k in (out.REST_API_ENDPOINT, out.REST_API_TOKEN_URL) if not outputs.get(k)]
        if missing:
            raise RestApiError(
                f"stack {stack} has no output {', '.join(missing)}: is rest_api enabled in its config and deployed?"
            )
        return cls(outputs[out.REST_API_ENDPOINT], outputs[out.REST_API_TOKEN_URL], outputs.get(out.REST_API_TLS_NAME))


def _pool(url: str, tls_name: str | None, ca_certs: str | None) -> urllib3.HTTPConnectionPool:
    parts = urlsplit(url)
    if parts.scheme != "https":
        raise RestApiError(f"{url}: the REST API and the minting function are reached over https only")
    return urllib3.HTTPSConnectionPool(
        parts.hostname or "",
        parts.port or 443,
        server_hostname=tls_name or parts.hostname,
        assert_hostname=tls_name or parts.hostname,
        cert_reqs="CERT_REQUIRED",
        ca_certs=ca_certs,
        timeout=urllib3.Timeout(TIMEOUT_S),
        retries=urllib3.Retry(total=2, connect=2, read=0, status=0, backoff_factor=0.5),
    )


def _answer(response: urllib3.BaseHTTPResponse, what: str) -> dict[str, Any]:
    try:
        body = json.loads(response.data or b"{}")
    except ValueError:
        body = {"message": response.data[:200].decode("utf-8", "replace")}
    if not isinstance(body, dict):
        body = {}
    found = [e for e in body.get("errors") or [] if isinstance(e, dict)]
    errors = [e.get("description") or e.get("error") for e in found]
    if response.status >= 400 or any(errors):
        told = "; ".join(str(e) for e in errors if e) or str(body.get("message") or "")
        # Slurm's ESLURM_INVALID_JOB_ID (slurm_errno.h): the job is not there, whatever HTTP status carries it.
        status = 404 if any(e.get("error_number") == INVALID_JOB_ID for e in found) else response.status
        raise RestApiError(f"{what}: HTTP {response.status}{': ' + told if told else ''}", status)
    return body


class TokenMinter:
    """Tokens from the minting function, signed with the caller's AWS credentials (SigV4, service ``lambda``).

    :param url: the function URL (``https://<id>.lambda-url.<region>.on.aws/``).
    :param session: the boto3 session whose credentials sign the request.
    :param clock: Unix time now. :param ca_certs: a CA bundle (tests). Default: the system's.
    """

    def __init__(
        self,
        url: str,
        session: boto3.session.Session,
        *,
        clock: Callable[[], float] = time.time,
        ca_certs: str | None = None,
    ) -> None:
        self.url, self.session, self.clock = url, session, clock
        host = urlsplit(url).hostname or ""
        labels = host.split(".")
        self.region = labels[2] if len(labels) > 3 and labels[1] == "lambda-url" else session.region_name
        self._pool = _pool(url, None, ca_certs)
        self._token: str | None = None
        self._expires = 0

    def __call__(self) -> str:
        """A token with a minute left at least: the one held, else a new one."""
        if self._token is None or self.clock() >= self._expires - REFRESH_MARGIN_S:
            self._token, self._expires = self.mint()
        return self._token

    def mint(self) -> tuple[str, int]:
        """A new token and its expiry (Unix time)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials = self.session.get_credentials()
        if credentials is None:
            raise RestApiError("no AWS credentials to sign the token request with (AWS_PROFILE, aws sso login)", 401)
        request = AWSRequest(method="POST", url=self.url, data=b"", headers={"Content-Type": "application/json"})
        SigV4Auth(credentials.get_frozen_credentials(), "lambda", self.region or "us-east-1").add_auth(request)
        path = urlsplit(self.url).path or "/"
        answer = _answer(
            self._pool.urlopen("POST", path, body=b"", headers=dict(request.headers.items()), redirect=False),
            "minting a token",
        )
        token = answer.get("token")
        if not isinstance(token, str):
            raise RestApiError("minting a token: the function answered without a token")
        try:
            expires = int(claims(token)["exp"])  # type: ignore[call-overload]
        except (TokenError, KeyError, TypeError, ValueError):
            raise RestApiError("minting a token: the function answered with no readable expiry") from None
        return token, expires


def job_description(
    script: str,
    *,
    name: str | None = None,
    partition: str | None = None,
    nodes: int | str | None = None,
    time_limit_min: int | None = None,
    cwd: str | None = None,
    account: str | None = None,
    environment: Mapping[str, str] | None = None,
    output: str | None = None,
) -> dict[str, Any]:
    """The ``job`` of a ``v0.0.42_job_submit_req``. The environment defaults to a PATH alone (sbatch passes the
    caller's whole environment; a REST caller's is not the cluster's)."""
    if not script.startswith("#!"):
        raise RestApiError("the batch script must start with #! (an interpreter line), as sbatch requires")
    env = dict(environment or {"PATH": DEFAULT_PATH})
    job: dict[str, Any] = {"script": script, "environment": [f"{k}={v}" for k, v in env.items()]}
    for key, value in (
        ("name", name),
        ("partition", partition),
        ("current_working_directory", cwd),
        ("account", account),
        ("standard_output", output),
    ):
        if value is not None:
            job[key] = value
    if nodes is not None:
        job["nodes"] = str(nodes)
    if time_limit_min is not None:
        job["time_limit"] = {"set": True, "infinite": False, "number": int(time_limit_min)}
    return job


class SlurmRestClient:
    """Jobs through slurmrestd's ``v0.0.42`` API.

    :param api_url: ``https://<host>:<port>`` (the stack's ``RestApiEndpoint``).
    :param token: gives a valid token on each call (a :class:`TokenMinter`, or a fixed token's ``lambda``).
    :param tls_name: the name on the API's certificate when the URL's host is not (the stack's
        ``RestApiTlsName``). Default: the URL's host.
    :param ca_certs: a CA bundle file. Default: the system's.
    """

    def __init__(
        self, api_url: str, token: Callable[[], str], *, tls_name: str | None = None, ca_certs: str | None = None
    ) -> None:
        self.api_url, self.token = api_url.rstrip("/"), token
        self._pool = _pool(api_url, tls_name, ca_certs)

    @classmethod
    def from_stack(
        cls,
        stack: str,
        *,
        profile: str | None = None,
        region: str | None = None,
        session: boto3.session.Session | None = None,
        ca_certs: str | None = None,
    ) -> SlurmRestClient:
        """The client of a deployed TrainingClusterStack, with tokens minted for the caller's AWS identity."""
        from hyperpod_cdk.aws.session import make_session
        from hyperpod_cdk.ops.training_job import stack_outputs

        session = session or make_session(profile, region)
        endpoints = Endpoints.of_outputs(stack_outputs(session.client("cloudformation"), stack), stack)
        return cls.of_endpoints(endpoints, session, ca_certs=ca_certs)

    @classmethod
    def of_endpoints(
        cls, endpoints: Endpoints, session: boto3.session.Session, *, ca_certs: str | None = None
    ) -> SlurmRestClient:
        minter = TokenMinter(endpoints.token_url, session, ca_certs=ca_certs)
        return cls(endpoints.api_url, minter, tls_name=endpoints.tls_name, ca_certs=ca_certs)

    def _call(self, method: str, path: str, what: str, body: Any = None, query: Mapping[str, str] | None = None) -> Any:
        url = f"/slurm/{API_VERSION}/{path}" + (f"?{urlencode(query)}" if query else "")
        headers = {TOKEN_HEADER: self.token(), "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        try:
            response = self._pool.urlopen(method, url, body=data, headers=headers, redirect=False)
        except urllib3.exceptions.HTTPError as error:
            raise RestApiError(f"{what}: {self.api_url} cannot be reached: {error}") from None
        return _answer(response, what)

    def submit(self, script: str, **description: Any) -> int:
        """Submits a batch job (``POST job/submit``); its job id. Keywords: :func:`job_description`'s."""
        answer = self._call("POST", "job/submit", "submitting a job", {"job": job_description(script, **description)})
        job_id = answer.get("job_id")
        if not isinstance(job_id, int):
            raise RestApiError("submitting a job: slurmrestd answered without a job id")
        return job_id

    def jobs(self) -> list[dict[str, Any]]:
        """Every job slurmctld knows (``GET jobs/``)."""
        return list(self._call("GET", "jobs/", "listing jobs").get("jobs") or [])

    def job(self, job_id: int | str) -> dict[str, Any]:
        """One job (``GET job/{job_id}``)."""
        found = self._call("GET", f"job/{quote(str(job_id), safe='')}", f"reading job {job_id}").get("jobs") or []
        if not found:
            raise RestApiError(f"reading job {job_id}: no such job", 404)
        return dict(found[0])

    def cancel(self, job_id: int | str, signal: str | None = None) -> None:
        """Cancels a job, or sends it ``signal`` (``DELETE job/{job_id}``)."""
        self._call(
            "DELETE",
            f"job/{quote(str(job_id), safe='')}",
            f"cancelling job {job_id}",
            query={"signal": signal} if signal else None,
        )


def summary(job: Mapping[str, Any]) -> dict[str, Any]:
    """The fields ``jobs list`` shows of a ``v0.0.42_job_info``."""
    state = job.get("job_state")
    return {
        "job_id": job.get("job_id"),
        "name": job.get("name"),
        "user": job.get("user_name"),
        "account": job.get("account"),
        "partition": job.get("partition"),
        "state": ",".join(state) if isinstance(state, Sequence) and not isinstance(state, str) else state,
        "nodes": job.get("nodes"),
    }
