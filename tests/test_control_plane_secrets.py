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
from hyperpod_local.control_plane.secrets import (
    KEY_LENGTH,
    SecretStore,
    generated,
    login_host_keys_name,
    rest_key_name,
    secret_arn,
)
from hyperpod_local.overlay import emulated
from local_support import CPU_CLUSTER
from rest_node_support import CONFIG
from test_control_plane import ARN, KEY
from training_runtime.aws_secrets import SecretsManager
from training_runtime.login_pool.params import LoginPoolParams
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


def test_put_secret_value_keeps_a_tokens_version_and_refuses_another_value_for_it(secrets: Secrets) -> None:
    """PutSecretValue's ClientRequestToken (API reference): the same token and value again is ignored; the same
    token with another value fails with ResourceExistsException, the version unchanged."""
    arn = secrets.store.create(login_host_keys_name("ml-cluster"), "placeholder")
    client = secrets.client()
    token = "11111111-2222-3333-4444-555555555555"
    assert client.put_secret_value(SecretId=arn, SecretString="first", ClientRequestToken=token)["VersionId"] == token
    again = client.put_secret_value(SecretId=arn, SecretString="first", ClientRequestToken=token)
    assert (again["VersionId"], again["VersionStages"]) == (token, ["AWSCURRENT"])
    with pytest.raises(ClientError) as exists:
        client.put_secret_value(SecretId=arn, SecretString="second", ClientRequestToken=token)
    assert exists.value.response["Error"]["Code"] == "ResourceExistsException"
    current = client.get_secret_value(SecretId=arn)
    assert (current["SecretString"], current["VersionId"]) == ("first", token)
    previous = client.get_secret_value(SecretId=arn, VersionStage="AWSPREVIOUS")["SecretString"]
    assert previous == "placeholder", "the idempotent retry did not move AWSPREVIOUS onto the same version"


def test_two_login_nodes_racing_through_the_control_plane_install_one_bundle(secrets: Secrets, tmp_path: Path) -> None:
    """The runtime's writer (training_runtime.steps.login_pool.pool_keys) against the emulated Secrets Manager: both
    nodes read the placeholder before either wrote; the second's write is refused and it takes the first's keys."""
    from runtime_fakes import fake_node
    from training_runtime.steps.login_pool import pool_keys

    arn = secrets.store.create(login_host_keys_name("ml-cluster"), generated())
    placeholder = secrets.runtime().current(arn)

    class Stale(SecretsManager):
        """Its first read is the one made before the other node wrote."""

        first = True

        def current(self, secret: str) -> tuple[str, str]:
            if self.first:
                self.first = False
                return placeholder
            return super().current(secret)

    def keygen(tag: str) -> Any:
        def make(argv: Any) -> None:
            path, kind = argv[argv.index("-f") + 1], argv[argv.index("-t") + 1]
            Path(path).write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{tag}{kind}\n")
            prefix = {"ed25519": "ssh-ed25519", "ecdsa": "ecdsa-sha2-nistp256", "rsa": "ssh-rsa"}[kind]
            Path(path + ".pub").write_text(f"{prefix} AAAA{tag} c\n")

        return make

    pool = LoginPoolParams(arn, "us-west-2")
    credentials = Credentials(KEY.access_key, KEY.secret_key, KEY.token)
    keys = []
    for tag in ("one", "two"):
        client = Stale(secrets.url, "us-west-2", lambda: credentials, attempts=1)
        node = fake_node(tmp_path / tag, instance="login-1")
        keys.append(pool_keys(node, pool, client=client, keygen=keygen(tag)))
    assert keys[0] == keys[1] and keys[0] is not None and "one" in keys[0]["rsa"][0]
    versions = secrets.client().describe_secret(SecretId=arn)["VersionIdsToStages"]
    assert sorted(map(tuple, versions.values())) == [("AWSCURRENT",), ("AWSPREVIOUS",)]


def test_the_local_cluster_names_its_own_host_key_secret_and_two_login_nodes(tmp_path: Path) -> None:
    """A config with login_pool: the parameters name the control plane's host-key secret (the stack's otherwise),
    the nodes reach Secrets Manager at the control plane, and the layout has two login nodes (one without)."""
    from hyperpod_local.layout import plan_nodes
    from hyperpod_local.staging import from_config

    data = yaml.safe_load(CPU_CLUSTER.read_text())
    data["instance_groups"][1]["count"] = 3
    data["login_pool"] = {"health_port": 2299}
    config = tmp_path / "pool.yaml"
    config.write_text(yaml.safe_dump(data))
    inputs = from_config(config)
    name = inputs.cluster_name
    assert inputs.deployed.login_pool == LoginPoolParams(secret_arn(login_host_keys_name(name)), "local", 2299)
    url = "http://10.224.0.3:8112"
    staged = ProvisioningParameters.loads(
        inputs.staged_files(secretsmanager_url=url)[inputs.deployed.file_name].decode()
    )
    assert staged.login_pool == inputs.deployed.login_pool
    assert staged.emulation is not None and staged.emulation.secretsmanager_url == url
    stack = dataclasses.replace(inputs.deployed, login_pool=LoginPoolParams(STACK_SECRET, "us-west-2", 2299))
    assert emulated(stack, secretsmanager_url=url).login_pool == inputs.deployed.login_pool
    layout = plan_nodes(name, inputs.groups, inputs.counts, login_nodes=2)
    assert [n.name for n in layout.nodes if n.role == "login"] == ["login-group-1", "login-group-2"]
    one = plan_nodes(name, inputs.groups, inputs.counts)
    assert [n.name for n in one.nodes if n.role == "login"] == ["login-group-1"]
