"""The REST client: tokens minted over SigV4 from the function's own code, jobs over TLS verified against the
certificate's name, every body valid against slurmrestd 24.11's v0.0.42 specification (tests/rest_support.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from hyperpod_cdk.rest.client import (
    DEFAULT_PATH,
    Endpoints,
    RestApiError,
    SlurmRestClient,
    TokenMinter,
    job_description,
    summary,
)
from rest_support import TLS_NAME, FakeRestApi, Served, serve, validate

KEY = b"s" * 64
ACCOUNT = "111122223333"
REGION = "us-west-2"
ALICE = ("AKIDALICE", "alice-secret")
MALLORY = ("AKIDMALLORY", "mallory-secret")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    api = FakeRestApi(
        key=KEY,
        identities={f"arn:aws:iam::{ACCOUNT}:role/pipeline": "alice"},
        callers={
            ALICE[0]: (ALICE[1], f"arn:aws:sts::{ACCOUNT}:assumed-role/pipeline/run-1"),
            MALLORY[0]: (MALLORY[1], f"arn:aws:sts::{ACCOUNT}:assumed-role/other/run-2"),
        },
        region=REGION,
    )
    yield from serve(api, tmp_path)


def session(key: tuple[str, str]) -> boto3.session.Session:
    return boto3.session.Session(aws_access_key_id=key[0], aws_secret_access_key=key[1], region_name=REGION)


def client(served: Served, key: tuple[str, str] = ALICE, tls_name: str | None = TLS_NAME) -> SlurmRestClient:
    endpoints = Endpoints(served.url, served.mint_url, tls_name)
    return SlurmRestClient.of_endpoints(endpoints, session(key), ca_certs=str(served.ca))


def test_submit_list_show_cancel_as_the_mapped_user(served: Served) -> None:
    slurm = client(served)
    job_id = slurm.submit("#!/bin/bash\nsrun hostname\n", partition="workers", nodes=2, time_limit_min=10, name="hi")
    assert [summary(j)["user"] for j in slurm.jobs()] == ["alice"]
    assert slurm.job(job_id)["name"] == "hi"
    slurm.cancel(job_id)
    assert summary(slurm.job(job_id))["state"] == "CANCELLED"
    method, path, _, body = served.api.requests[0]
    assert (method, path) == ("POST", "/slurm/v0.0.42/job/submit")
    job = body["job"]
    assert job["nodes"] == "2" and job["time_limit"] == {"set": True, "infinite": False, "number": 10}
    assert job["environment"] == [f"PATH={DEFAULT_PATH}"]
    assert served.api.mints == 1  # one token serves every call while it is valid


def test_a_token_is_minted_again_a_minute_before_it_expires(served: Served) -> None:
    clock = [float(served.api.clock[0])]
    minter = TokenMinter(served.mint_url, session(ALICE), clock=lambda: clock[0], ca_certs=str(served.ca))
    first = minter()
    clock[0] += 900 - 61
    assert minter() == first
    clock[0] += 1
    served.api.clock[0] += 1  # a new iat, so a new token
    assert minter() != first and served.api.mints == 2


def test_an_unmapped_caller_gets_no_token_and_a_403(served: Served) -> None:
    with pytest.raises(RestApiError) as refused:
        client(served, MALLORY).jobs()
    assert refused.value.status == 403 and "mapped to no Slurm user" in str(refused.value)
    assert served.api.requests == []


def test_a_bad_signature_is_refused_by_the_url(served: Served) -> None:
    with pytest.raises(RestApiError) as refused:
        client(served, (ALICE[0], "wrong-secret")).jobs()
    assert refused.value.status == 403


def test_tls_is_verified_against_the_certificates_name(served: Served) -> None:
    with pytest.raises(RestApiError, match="cannot be reached"):
        client(served, tls_name="other.example.com").jobs()


def test_a_missing_job_is_a_404(served: Served) -> None:
    with pytest.raises(RestApiError) as missing:
        client(served).job(4242)
    assert missing.value.status == 404 and "Invalid job id" in str(missing.value)


def test_the_descriptions_are_valid_submit_requests() -> None:
    full = job_description(
        "#!/bin/bash\ntrue\n",
        name="n",
        partition="p",
        nodes="1-4",
        time_limit_min=5,
        cwd="/fsx/alice",
        account="team-a",
        environment={"A": "1", "PATH": "/bin"},
        output="/fsx/alice/%j.out",
    )
    validate("v0.0.42_job_submit_req", {"job": full})
    assert full["environment"] == ["A=1", "PATH=/bin"]
    with pytest.raises(RestApiError, match="#!"):
        job_description("srun hostname")


def test_endpoints_need_the_stacks_rest_outputs() -> None:
    with pytest.raises(RestApiError, match="RestApiEndpoint, RestApiTokenUrl"):
        Endpoints.of_outputs({"ClusterName": "c"}, "hyperpod-c")
    with pytest.raises(RestApiError, match="https only"):
        SlurmRestClient("http://10.0.0.1:6820", lambda: "t")
