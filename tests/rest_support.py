"""In-process stand-ins for the REST API's two HTTPS endpoints, for the client's and the jobs command's tests.

``FakeRestApi`` serves, over TLS with a certificate made here (a CA, then a server certificate for
``slurm.example.com`` and ``localhost``, no IP address, so a client that verified the address it connects to rather than
the name it is told fails):

* the minting function's URL: the SigV4 signature is recomputed with botocore's signer (service ``lambda``), the
  access key names the caller's ARN, and the function's own code (:func:`hyperpod_cdk.rest.minter.handler.respond`)
  answers the Function URL event made of it;
* slurmrestd's ``v0.0.42`` job paths: the token is verified with the signing key, and every request and answer body
  is validated against the OpenAPI specification Debian's slurmrestd 24.11.5 generates
  (tests/fixtures/slurmrestd/openapi-v0.0.42.json: ``slurmrestd -d v0.0.42 -s slurmctld,slurmdbd
  --generate-openapi-spec`` in the local cluster's trixie node root, trimmed to the paths the client calls and the
  schemas they reference).
"""

from __future__ import annotations

import datetime
import hmac
import json
import re
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from hyperpod_cdk.rest.minter import handler as minter
from hyperpod_cdk.rest.minter.token import TokenError, verify

SPEC = json.loads((Path(__file__).parent / "fixtures" / "slurmrestd" / "openapi-v0.0.42.json").read_text())
TLS_NAME = "slurm.example.com"
AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request,"
    r"\s*SignedHeaders=(?P<signed>[^,]+),\s*Signature=(?P<signature>[0-9a-f]{64})"
)


def validate(schema: str, body: Any) -> None:
    """``body`` is a valid ``#/components/schemas/<schema>`` of the generated specification."""
    jsonschema.Draft7Validator({"$ref": f"#/components/schemas/{schema}", "components": SPEC["components"]}).validate(
        body
    )


def certificates(directory: Path) -> tuple[Path, Path, Path]:
    """(CA bundle, server certificate, server key) for ``TLS_NAME`` and ``localhost``, valid around today."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, TLS_NAME)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(TLS_NAME), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


@dataclass
class FakeRestApi:
    """The minting URL (``/mint/``) and slurmrestd (``/slurm/v0.0.42/...``) on one TLS port."""

    key: bytes
    identities: dict[str, str]
    """Principal key -> Slurm user (the function's environment)."""
    callers: dict[str, tuple[str, str]]
    """Access key id -> (secret key, the caller's ARN as the Function URL reports it)."""
    region: str
    clock: list[int] = field(default_factory=lambda: [1_800_000_000])  # the fake server's injected clock
    jobs: dict[int, dict[str, Any]] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    mints: int = 0

    def mint(self, method: str, url: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
        lower = {k.lower(): v for k, v in headers.items()}
        found = AUTHORIZATION.fullmatch(lower.get("authorization", "").strip())
        if not found or found["key"] not in self.callers or found["service"] != "lambda":
            return 403, {"Message": "Forbidden"}
        secret, arn = self.callers[found["key"]]
        names = found["signed"].split(";")
        request = AWSRequest(method=method, url=url, data=body, headers={n: lower.get(n, "") for n in names})
        request.context["timestamp"] = lower.get("x-amz-date", "")
        signer = SigV4Auth(Credentials(found["key"], secret), "lambda", found["region"])
        expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
        if (
            found["region"] != self.region
            or "host" not in names
            or not hmac.compare_digest(expected, found["signature"])
        ):
            return 403, {"Message": "The request signature we calculated does not match the signature you provided."}
        self.mints += 1
        event = {"requestContext": {"http": {"method": method}, "authorizer": {"iam": {"userArn": arn}}}}
        settings = minter.Settings("arn:secret", 900, self.identities)
        reply = minter.respond(
            event,
            settings,
            key=lambda: self.key,
            tags_of=lambda *_: None,
            own_account=None,
            now=self.clock[0],
            log=lambda _: None,
        )
        return int(reply["statusCode"]), json.loads(reply["body"])

    def slurm(self, method: str, path: str, headers: dict[str, str], body: Any) -> tuple[int, dict[str, Any]]:
        token = {k.lower(): v for k, v in headers.items()}.get("x-slurm-user-token")
        try:
            user = str(verify(self.key, token or "", self.clock[0])["sun"])
        except TokenError as error:
            return 401, {"errors": [{"error": "Authentication failure", "description": str(error)}]}
        self.requests.append((method, path, headers, body))
        base = "/slurm/v0.0.42/"
        if method == "POST" and path == base + "job/submit":
            validate("v0.0.42_job_submit_req", body)
            job_id = 100 + len(self.jobs)
            job = body["job"]
            self.jobs[job_id] = {
                "job_id": job_id,
                "name": job.get("name", "sbatch"),
                "user_name": user,
                "account": job.get("account", "root"),
                "partition": job.get("partition", "workers"),
                "job_state": ["PENDING"],
                "nodes": "",
            }
            answer: dict[str, Any] = {"job_id": job_id, "step_id": "batch", "errors": [], "warnings": []}
            validate("v0.0.42_openapi_job_submit_response", answer)
            return 200, answer
        if method == "GET" and path == base + "jobs/":
            answer = {"jobs": list(self.jobs.values()), **self._stamps(), "errors": [], "warnings": []}
            validate("v0.0.42_openapi_job_info_resp", answer)
            return 200, answer
        match = re.fullmatch(re.escape(base) + r"job/(\d+)", path)
        if match is None:
            return 404, {"errors": [{"error": "Unable to find path"}]}
        job = self.jobs.get(int(match[1]))
        if job is None:
            return 500, {"errors": [{"error_number": 2017, "error": "Invalid job id specified"}]}
        if method == "GET":
            answer = {"jobs": [job], **self._stamps(), "errors": [], "warnings": []}
            validate("v0.0.42_openapi_job_info_resp", answer)
            return 200, answer
        if method == "DELETE":
            job["job_state"] = ["CANCELLED"]
            return 200, {"errors": [], "warnings": []}
        return 405, {"errors": [{"error": "method"}]}

    def _stamps(self) -> dict[str, Any]:
        """What a job list must say besides the jobs (the specification's ``required``)."""
        stamp = {"set": True, "infinite": False, "number": self.clock[0]}
        return {"last_backfill": stamp, "last_update": stamp}

    def handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                headers = dict(self.headers.items())
                if parts.path.startswith("/mint/"):
                    url = f"https://{self.headers['Host']}{self.path}"
                    status, answer = api.mint(self.command, url, headers, raw)
                else:
                    body = json.loads(raw) if raw else None
                    status, answer = api.slurm(self.command, parts.path, headers, body)
                    if parts.query:
                        answer = {**answer, "_query": parse_qs(parts.query)}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@dataclass
class Served:
    api: FakeRestApi
    url: str
    """``https://127.0.0.1:<port>``: the API, whose certificate names ``TLS_NAME`` (not the address)."""
    ca: Path

    @property
    def mint_url(self) -> str:
        """The minting URL, by a name on the certificate (``localhost``)."""
        return self.url.replace("127.0.0.1", "localhost") + "/mint/"


def serve(api: FakeRestApi, directory: Path) -> Iterator[Served]:
    """``api`` on 127.0.0.1 over TLS until the generator is closed."""
    ca, cert, key = certificates(directory)
    server = ThreadingHTTPServer(("127.0.0.1", 0), api.handler())
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(api, f"https://127.0.0.1:{server.server_address[1]}", ca)
    finally:
        server.shutdown()
        server.server_close()
