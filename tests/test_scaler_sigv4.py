"""The scaler's SigV4 signer (training_runtime.scaler.sigv4) against botocore's on fixed inputs.

Not a runtime_tests file on Python 3.8: it imports botocore (the reference), which the 3.8 venv lacks.
"""

from __future__ import annotations

import datetime
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials

from training_runtime.scaler.sigv4 import Credentials, sign

NOW = datetime.datetime(2026, 11, 26, 1, 2, 3, tzinfo=datetime.UTC)  # signing takes its time: a signature is checked
BODY = b'{"ClusterName": "demo", "NodesToAdd": [{"InstanceGroupName": "gpu", "IncrementTargetCountBy": 2}]}'


def botocore_signed(url: str, headers: dict[str, str], creds: Credentials, region: str) -> dict[str, str]:
    request = AWSRequest(method="POST", url=url, data=BODY, headers=headers)
    auth = SigV4Auth(BotoCredentials(creds.access_key, creds.secret_key, creds.token), "sagemaker", region)
    with mock.patch("botocore.auth.get_current_datetime", return_value=NOW.replace(tzinfo=None)):
        auth.add_auth(request)
    return dict(request.headers.items())


@pytest.mark.parametrize(
    ("url", "token"),
    [
        ("https://api.sagemaker.us-west-2.amazonaws.com/", "session-token/with+odd=chars"),
        ("https://api.sagemaker.us-west-2.amazonaws.com/", None),
        ("http://10.89.0.1:8443/", "tok"),
        ("http://127.0.0.1:80/", None),
    ],
)
def test_the_signature_is_botocores(url: str, token: str | None) -> None:
    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    headers = {
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": "SageMaker.BatchAddClusterNodes",
    }
    ours = sign("POST", url, headers, BODY, creds, "us-west-2", "sagemaker", NOW)
    theirs = botocore_signed(url, dict(headers), creds, "us-west-2")
    assert ours["Authorization"] == theirs["Authorization"]
    assert ours["X-Amz-Date"] == theirs["X-Amz-Date"]
    assert ours.get("X-Amz-Security-Token") == theirs.get("X-Amz-Security-Token")


def test_a_different_body_or_region_changes_the_signature() -> None:
    creds = Credentials("AKIDEXAMPLE", "secret")
    url = "https://api.sagemaker.us-east-1.amazonaws.com/"
    base = sign("POST", url, {}, BODY, creds, "us-east-1", "sagemaker", NOW)["Authorization"]
    assert sign("POST", url, {}, BODY + b" ", creds, "us-east-1", "sagemaker", NOW)["Authorization"] != base
    assert sign("POST", url, {}, BODY, creds, "us-east-2", "sagemaker", NOW)["Authorization"] != base


def test_credentials_never_print_their_secret() -> None:
    assert "secret" not in repr(Credentials("AKID", "secret", "token"))
