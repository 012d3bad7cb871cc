"""The local cluster's emulated Secrets Manager (hyperpod_local.control_plane.secrets) on the control plane's endpoint:
boto3's shapes and AWS's staging labels, SigV4 for ``secretsmanager``; the controller's own client (the runtime's
stdlib SigV4, :mod:`training_runtime.rest.secret`) reads the key through it as on AWS."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.config import Config
from botocore.exceptions import ClientError

from hyperpod_local.control_plane.fleet import Fleet, Settings
from hyperpod_local.control_plane.memory import MemoryBackend
from hyperpod_local.control_plane.model import ClusterInfo
from hyperpod_local.control_plane.operations import ControlPlane
from hyperpod_local.control_plane.protocol import Endpoint
from hyperpod_local.control_plane.secrets import KEY_LENGTH, SecretStore, generated, rest_key_name, secret_arn
from hyperpod_local.overlay import emulated
from rest_node_support import CONFIG
from test_control_plane import ARN, KEY
from training_runtime.aws_secrets import SecretsManager
from training_runtime.params import ProvisioningParameters
from training_runtime.rest.params import RestApiParams
from training_runtime.rest.secret import SecretError, fetch_key
from training_runtime.scaler.sigv4 import Credentials

NAME = rest_key_name("ml-cluster")
VALUE = "A" * 64
STACK_SECRET = "arn:aws:secretsmanager:us-west-2:111122223333:secret:rest-cluster-rest-key-AbCdEf"


@dataclass
class Secrets:
    store: SecretStore
    url: str

    def client(self, service: str = "secretsmanager") -> Any:
        return boto3.session.Session().client(
            service,
            region_name="us-west-2",
            endpoint_url=self.url,
            aws_access_key_id=KEY.access_key,
            aws_secret_access_key=KEY.secret_key,
            aws_session_token=KEY.token,
            config=Config(retries={"max_attempts": 1}),
        )

    def runtime(self, key: Credentials | None = None) -> SecretsManager:
        credentials = key or Credentials(KEY.access_key, KEY.secret_key, KEY.token)
        return SecretsManager(self.url, "us-west-2", lambda: credentials, attempts=1)


@pytest.fixture
def secrets(tmp_path: Path) -> Iterator[Secrets]:
    fleet = Fleet([], [], MemoryBackend(), settings=lambda: Settings(), clock=time.time, spawn=lambda w: w())
    store = SecretStore(tmp_path / "secrets.json")
    endpoint = Endpoint(
        ControlPlane(ClusterInfo("ml-cluster", ARN, True, 0.0), fleet), lambda: [KEY], secret_store=store
    )
    url = endpoint.serve()
    try:
        yield Secrets(store, url)
    finally:
        endpoint.stop()


def test_the_stacks_secret_is_read_by_name_or_arn_with_its_current_stage(secrets: Secrets) -> None:
    arn = secrets.store.create(NAME, VALUE)
    assert arn == secret_arn(NAME) and arn.startswith("arn:aws:secretsmanager:local:000000000000:secret:" + NAME + "-")
    assert secrets.store.create(NAME, "ignored") == arn  # created once, as the stack creates it
    client = secrets.client()
    for secret_id in (arn, NAME):
        got = client.get_secret_value(SecretId=secret_id)
        assert (got["ARN"], got["SecretString"], got["VersionStages"]) == (arn, VALUE, ["AWSCURRENT"])


def test_a_new_value_becomes_current_and_the_old_one_previous(secrets: Secrets) -> None:
    arn = secrets.store.create(NAME, VALUE)
    client = secrets.client()
    put = client.put_secret_value(SecretId=arn, SecretString="B" * 64)
    assert put["VersionStages"] == ["AWSCURRENT"]
    assert client.get_secret_value(SecretId=arn)["SecretString"] == "B" * 64
    assert client.get_secret_value(SecretId=arn, VersionStage="AWSPREVIOUS")["SecretString"] == VALUE
    client.put_secret_value(SecretId=arn, SecretString="C" * 64)
    stages = sorted(v for vs in client.describe_secret(SecretId=arn)["VersionIdsToStages"].values() for v in vs)
    assert stages == ["AWSCURRENT", "AWSPREVIOUS"]  # the oldest version lost its label
    assert client.get_secret_value(SecretId=arn, VersionStage="AWSPREVIOUS")["SecretString"] == "B" * 64
    with pytest.raises(ClientError) as missing:
        client.get_secret_value(SecretId="no-such-secret")
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_the_controllers_stdlib_client_reads_the_current_key(secrets: Secrets) -> None:
    arn = secrets.store.create(NAME, VALUE)
    assert fetch_key(secrets.runtime(), arn) == VALUE.encode()
    secrets.client().put_secret_value(SecretId=arn, SecretString="D" * 64)
    assert fetch_key(secrets.runtime(), arn) == b"D" * 64


def test_a_request_signed_for_another_service_or_key_is_refused(secrets: Secrets) -> None:
    arn = secrets.store.create(NAME, VALUE)
    wrong = secrets.runtime()
    wrong.service = "sagemaker"  # signed for SageMaker: the endpoint checks the service in the credential scope
    with pytest.raises(SecretError, match="InvalidSignatureException"):
        fetch_key(wrong, arn)
    with pytest.raises(SecretError, match=r"UnrecognizedClientException.*secretsmanager:GetSecretValue"):
        fetch_key(secrets.runtime(Credentials("ASIAOTHER", "x", KEY.token)), arn)


def test_an_unusable_value_is_refused_without_showing_it(secrets: Secrets) -> None:
    short = "s3cr3t-value"
    arn = secrets.store.create(NAME, short)
    with pytest.raises(SecretError) as error:
        fetch_key(secrets.runtime(), arn)
    assert "not a usable HS256 key (12 bytes" in str(error.value) and short not in str(error.value)
    secrets.client().put_secret_value(SecretId=arn, SecretString="x" * 40 + " spaced" + "y" * 20)
    with pytest.raises(SecretError, match="printable ASCII characters without spaces"):
        fetch_key(secrets.runtime(), arn)


def test_a_missing_secret_names_the_fix(secrets: Secrets) -> None:
    with pytest.raises(SecretError, match=r"ResourceNotFoundException.*redeploy the stack"):
        fetch_key(secrets.runtime(), secret_arn("gone"))


def test_generated_values_are_the_stacks_length_of_letters_and_digits() -> None:
    values = {generated() for _ in range(20)}
    assert len(values) == 20 and all(len(v) == KEY_LENGTH and v.isalnum() and v.isascii() for v in values)


def test_the_local_cluster_names_its_own_secret_and_endpoint_for_the_api(tmp_path: Path) -> None:
    """The emulator's overlay: the deployed secret is a stack's (only known at deploy); locally the control plane's,
    read at the control plane's address on the bridge; off, nothing of it."""
    from hyperpod_local.staging import from_config

    config = tmp_path / "rest.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    inputs = from_config(config)
    assert inputs.deployed.rest_api == RestApiParams(secret_arn(rest_key_name("rest-cluster")), "local")
    url = "http://10.224.0.3:8112"
    staged = inputs.staged_files(sagemaker_url=url, secretsmanager_url=url)
    params = ProvisioningParameters.loads(staged[inputs.deployed.file_name].decode())
    assert params.rest_api == inputs.deployed.rest_api
    assert params.emulation is not None and params.emulation.secretsmanager_url == url
    deployed = dataclasses.replace(inputs.deployed, rest_api=RestApiParams(STACK_SECRET, "us-west-2", port=8443))
    assert emulated(deployed, secretsmanager_url=url).rest_api == RestApiParams(
        secret_arn(rest_key_name("rest-cluster")), "local", port=8443
    )  # a synthesized assembly's file names the stack's secret: the local cluster's replaces it
    config.write_text(yaml.safe_dump({k: v for k, v in CONFIG.items() if k != "rest_api"}))
    off = from_config(config)
    plain = ProvisioningParameters.loads(off.staged_files(secretsmanager_url=url)[off.deployed.file_name].decode())
    assert plain.rest_api is None and plain.emulation is not None and plain.emulation.secretsmanager_url is None


def test_a_secret_made_outside_the_stack_is_served_by_its_full_arn_and_its_name(secrets: Secrets) -> None:
    """The directory's bind password (issue #41): the user's own secret, put by its ARN (``put_secret``)."""
    bind = "arn:aws:secretsmanager:us-west-2:111122223333:secret:ldap-bind-AbCdEf"
    secrets.store.put(bind, "s3cr3t")
    answer = secrets.client().get_secret_value(SecretId=bind)
    assert (answer["ARN"], answer["SecretString"], answer["VersionStages"]) == (bind, "s3cr3t", ["AWSCURRENT"])
    assert secrets.client().get_secret_value(SecretId="ldap-bind-AbCdEf")["SecretString"] == "s3cr3t"
    secrets.store.put(bind, "n3w")  # a changed password: one current version, the old one gone
    stages = secrets.client().describe_secret(SecretId=bind)["VersionIdsToStages"]
    assert list(stages.values()) == [["AWSCURRENT"]]
    assert secrets.runtime().secret_string(bind) == "n3w"
    with pytest.raises(ClientError) as missing:
        secrets.client().get_secret_value(SecretId=bind.replace("ldap", "db"))
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
