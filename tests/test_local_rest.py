"""Slurm's REST API on a local cluster (issue #42, docs/rest-api.md "Proved locally"): Debian's slurmrestd 24.11 on
the controller behind the runtime's TLS endpoint, its JWT key read from the emulated Secrets Manager at bootstrap.
Jobs are submitted, listed and cancelled through it with tokens minted by the minting function's own code
(``hyperpod_cdk.rest.minter.token.mint``) from the secret's value; an expired token, a token used for another user and
a token signed with the key before a rotation are refused by slurmctld; a job submitted over REST is in ``sacct``
under its user and their team's account; the rotation leaves a running job running; a replaced controller serves the
API again; and ``hyperpod-cdk jobs`` runs end to end with a token the minting function's handler mints for the
caller's SigV4-signed IAM identity. One cluster (controller and one worker, HyperPod platform) for the module; the
tests run in file order.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_cdk.core import stack_outputs as out
from hyperpod_cdk.rest.client import RestApiError, SlurmRestClient
from hyperpod_cdk.rest.minter.token import mint
from hyperpod_local import LocalCluster
from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.netns import entered
from hyperpod_local.plan import UpOptions
from local_support import requires_hyperpod_platform, variant
from ops_support import REGION, Operator, aws_env, moto_url, stack_with_outputs  # noqa: F401
from rest_node_support import CONFIG, rest_key, secrets_client
from rest_support import FakeRestApi, serve
from training_runtime.node import HYPERPOD
from training_runtime.rest.config import CERTIFICATE

pytestmark = requires_hyperpod_platform

CONTROLLER, WORKER = "controller-machine-1", "worker-group-1-1"
PORT = 6820
REFRESH = "/opt/hyperpod-cdk/bin/rest-key-refresh"
SLURMCTLD_LOG = "/var/log/slurm/slurmctld.log"


class Rest:
    """The cluster's REST API as a caller in the VPC sees it: through the switch's namespace (the nodes' network),
    TLS verified against the controller's certificate, tokens minted from the secret's current value."""

    def __init__(self, cluster: LocalCluster, workdir: Path) -> None:
        self.cluster = cluster
        self.address = cluster.node(CONTROLLER).ip
        self.workdir = workdir
        self.secrets = secrets_client(cluster)
        self.arn = control_plane.rest_key_arn(cluster)
        self.current = self.key()
        self.load_certificate()

    def load_certificate(self) -> None:
        self.certificate = self.workdir / "controller.crt"
        self.certificate.write_text(run(self.cluster, CONTROLLER, "cat", CERTIFICATE))

    def key(self) -> bytes:
        """The secret's AWSCURRENT value, read on the host (the minting function's read)."""
        return rest_key(self.cluster)

    def token(self, user: str, key: bytes | None = None, *, lifetime_s: int = 900, now: int | None = None) -> str:
        """A token as the minting function mints it, with :attr:`current` (the key last read) unless ``key``."""
        return mint(key or self.current, user, lifetime_s, int(time.time()) if now is None else now)

    def client(self, token: Callable[[], str]) -> SlurmRestClient:
        return SlurmRestClient(f"https://{self.address}:{PORT}", token, ca_certs=str(self.certificate))

    def call(self, what: Callable[[], Any]) -> Any:
        with entered(self.cluster.namespaces.switch):
            return what()

    def raw(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """One request with exactly ``headers`` (the client sends no X-SLURM-USER-NAME)."""
        context = ssl.create_default_context(cafile=str(self.certificate))
        with entered(self.cluster.namespaces.switch):
            connection = http.client.HTTPSConnection(self.address, PORT, context=context, timeout=30)
            connection.request(method, path, headers=headers)
            response = connection.getresponse()
            body = json.loads(response.read() or b"{}")
            connection.close()
        return response.status, body


def run(cluster: LocalCluster, node: str, *argv: str) -> str:
    result = cluster.exec(node, list(argv), timeout=120)
    assert result.returncode == 0, f"{node}: {' '.join(argv)}\n{result.stdout}{result.stderr}"
    return result.stdout


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    workdir = tmp_path_factory.mktemp("local-rest")
    config = workdir / "rest.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    cluster = LocalCluster.up(
        config,
        workdir / "work",
        variant(platform=HYPERPOD),
        UpOptions(prefix=f"hprs{os.getpid() % 10000}", subnet="10.224.0.0/24"),
    )
    try:
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="module")
def rest(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Rest:
    return Rest(cluster, tmp_path_factory.mktemp("local-rest-client"))


def refused(rest: Rest, client: SlurmRestClient) -> RestApiError:
    """The error of listing jobs with ``client``'s token (slurmrestd answers Slurm's own refusal)."""
    with pytest.raises(RestApiError) as error:
        rest.call(client.jobs)
    assert error.value.status is not None and error.value.status >= 400, error.value
    return error.value


def logged(rest: Rest, line: str) -> bool:
    return line in run(rest.cluster, CONTROLLER, "tail", "-n", "30", SLURMCTLD_LOG)


def state(rest: Rest, client: SlurmRestClient, job_id: int) -> str:
    return ",".join(rest.call(lambda: client.job(job_id))["job_state"])


def test_jobs_are_submitted_listed_and_cancelled_over_rest_as_the_tokens_user(rest: Rest) -> None:
    alice = rest.client(lambda: rest.token("alice"))
    job_id = rest.call(lambda: alice.submit("#!/bin/bash\nsleep 300", partition="cpu", cwd="/tmp"))
    listed = rest.call(alice.jobs)
    mine = next(j for j in listed if j["job_id"] == job_id)
    assert (mine["user_name"], mine["account"]) == ("alice", "vision")  # the team's account, as sbatch would
    wait_for("the job to run", lambda: state(rest, alice, job_id) == "RUNNING")
    rest.call(lambda: alice.cancel(job_id))
    wait_for("the job to be cancelled", lambda: state(rest, alice, job_id) == "CANCELLED")


@contextlib.contextmanager
def relayed(rest: Rest) -> Iterator[str]:
    """``https://127.0.0.1:<port>`` on the host, relayed byte for byte to the controller's TLS endpoint through the
    switch's namespace: the load balancer's place, so that a command on the host (moto and the minting URL on its
    loopback) reaches the node. TLS is end to end: the relay sees only ciphertext."""
    listener = socket.create_server(("127.0.0.1", 0))

    def pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                caller, _ = listener.accept()
                with entered(rest.cluster.namespaces.switch):
                    node = socket.create_connection((rest.address, PORT), timeout=30)
                for ends in ((caller, node), (node, caller)):
                    threading.Thread(target=pump, args=ends, daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def test_the_jobs_command_works_end_to_end_with_a_token_minted_for_the_callers_iam_identity(
    rest: Rest,
    aws_env: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """``hyperpod-cdk jobs`` as an operator runs it: the stack's outputs from (moto's) CloudFormation; a token from the
    minting URL for the caller's IAM role session, SigV4-signed and checked, answered by the minting function's own
    handler with the signing key's current value and the config's identity map (rest_support.FakeRestApi); the job
    submitted, listed and cancelled on the controller's real slurmrestd as the Slurm user that role maps to."""
    session_arn = "arn:aws:sts::111122223333:assumed-role/vision-pipelines/notebook"
    identities = {i["principal_arn"]: i["slurm_user"] for i in CONFIG["rest_api"]["identities"]}
    api = FakeRestApi(
        key=rest.key(), identities=identities, callers={"testing": ("testing", session_arn)}, region=REGION
    )
    api.clock[0] = int(time.time())  # slurmctld judges the token by the real clock
    running = serve(api, tmp_path)
    served = next(running)
    bundle = tmp_path / "ca-bundle.pem"
    bundle.write_text(served.ca.read_text() + rest.certificate.read_text())
    try:
        with relayed(rest) as endpoint:
            outputs = {
                out.CLUSTER_NAME: "rest",
                out.REST_API_ENDPOINT: endpoint,
                out.REST_API_TLS_NAME: rest.address,  # the node's certificate names its address; the NLB's, its name
                out.REST_API_TOKEN_URL: served.mint_url,
            }
            stack_with_outputs("hyperpod-rest", outputs)

            def jobs(*argv: str) -> Any:
                found = Operator()("jobs", argv[0], "rest", *argv[1:], "--ca-bundle", str(bundle), "--json")
                assert found.code == 0, found.err
                return json.loads(found.out)

            job_id = jobs("submit", "--wrap", "sleep 300", "-p", "cpu", "--cwd", "/tmp")["job_id"]
            mine = [j for j in jobs("list") if j["job_id"] == job_id]
            assert [(j["user"], j["account"]) for j in mine] == [("alice", "vision")], mine
            assert jobs("cancel", str(job_id)) == {"cancelled": True, "job_id": str(job_id)}
    finally:
        running.close()
    assert api.mints >= 1  # the tokens came from the minting URL, for the caller's role session
    alice = rest.client(lambda: rest.token("alice"))
    wait_for("the job to be cancelled", lambda: state(rest, alice, job_id) == "CANCELLED")


def test_a_job_submitted_over_rest_is_in_sacct_under_its_user_and_team_account(rest: Rest) -> None:
    bob = rest.client(lambda: rest.token("bob"))
    job_id = rest.call(lambda: bob.submit("#!/bin/bash\ntrue", partition="cpu", cwd="/tmp", name="rest-sacct"))

    def record() -> str:
        argv = ("sacct", "-a", "-n", "-X", "-P", "-j", str(job_id), "-o", "user,account,state")
        out = run(rest.cluster, CONTROLLER, *argv)
        return out.strip() if "COMPLETED" in out else ""

    assert wait_for("sacct to record the job", record) == "bob|nlp|COMPLETED"


def test_an_expired_token_is_refused(rest: Rest) -> None:
    refused(rest, rest.client(lambda: rest.token("alice", lifetime_s=60, now=int(time.time()) - 120)))
    assert logged(rest, "auth_p_verify: token expired")


def test_a_token_used_for_another_user_is_refused(rest: Rest) -> None:
    """SchedMD's rest.html: "SlurmUser or root can provide alternative user names to act as a proxy for the given
    user"; any other token works only for its own user: alice's token naming bob is refused."""
    path = "/slurm/v0.0.42/jobs/"
    token = rest.token("alice")
    status, own = rest.raw("GET", path, {"X-SLURM-USER-TOKEN": token, "X-SLURM-USER-NAME": "alice"})
    assert status == 200 and not own.get("errors"), own
    status, other = rest.raw("GET", path, {"X-SLURM-USER-TOKEN": token, "X-SLURM-USER-NAME": "bob"})
    assert status != 200 and [e["error"] for e in other["errors"]] == ["Protocol authentication error"], other
    assert logged(rest, "attempt to authenticate as alternate user alice from non-SlurmUser bob")


def test_users_cannot_make_tokens_on_the_cluster(rest: Rest) -> None:
    """``disable_token_creation``: tokens come from the IAM-authorized minting function only."""
    made = rest.cluster.exec(CONTROLLER, ["runuser", "-u", "alice", "--", "scontrol", "token"], timeout=60)
    assert made.returncode != 0 and "SLURM_JWT=" not in made.stdout, made.stdout + made.stderr


def test_plain_http_never_leaves_the_controller(rest: Rest) -> None:
    """slurmrestd listens on its UNIX socket only; the one TCP listener on the port speaks TLS."""
    sockets = run(rest.cluster, CONTROLLER, "ss", "-H", "-l", "-p")
    assert "slurmrestd" in sockets
    assert not [line for line in sockets.splitlines() if "slurmrestd" in line and line.split()[0] != "u_str"], sockets
    with entered(rest.cluster.namespaces.switch):
        plain = http.client.HTTPConnection(rest.address, PORT, timeout=10)
        with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
            plain.request("GET", "/openapi/v3")
            plain.getresponse().read()
        plain.close()


def test_a_rotated_key_is_loaded_without_stopping_running_jobs_and_the_old_key_is_refused(rest: Rest) -> None:
    old_key = rest.current
    alice = rest.client(lambda: rest.token("alice"))
    job_id = rest.call(lambda: alice.submit("#!/bin/bash\nsleep 300", partition="cpu", cwd="/tmp"))
    wait_for("the job to run", lambda: state(rest, alice, job_id) == "RUNNING")
    before = {d: run(rest.cluster, CONTROLLER, "cat", f"/run/{d}.pid").strip() for d in ("slurmctld", "slurmdbd")}
    rest.secrets.put_secret_value(SecretId=rest.arn, SecretString="n3w" + "K" * 61)
    assert json.loads(run(rest.cluster, CONTROLLER, REFRESH))["result"] == "rotated"
    rest.current = rest.key()
    assert rest.current != old_key
    refused(rest, rest.client(lambda: rest.token("alice", old_key)))
    assert logged(rest, "auth_p_verify: jwt_decode failure")
    assert state(rest, alice, job_id) == "RUNNING"  # a token of the new key; the job went on
    after = {d: run(rest.cluster, CONTROLLER, "cat", f"/run/{d}.pid").strip() for d in ("slurmctld", "slurmdbd")}
    # scontrol reconfigure hands over to a new slurmctld process (its state, not its PID); slurmdbd was restarted.
    assert after["slurmctld"] != before["slurmctld"] and after["slurmdbd"] != before["slurmdbd"]
    assert json.loads(run(rest.cluster, CONTROLLER, REFRESH))["result"] == "unchanged"
    rest.call(lambda: alice.cancel(job_id))


def test_rerunning_the_controllers_bootstrap_changes_nothing(rest: Rest) -> None:
    code, output = rest.cluster.bootstrap(CONTROLLER)
    assert code == 0, output
    changed = [json.loads(line)["step"] for line in output.splitlines() if '"result": "changed"' in line]
    assert changed == [] and '"changed": 0' in output.splitlines()[-1], changed


def test_a_replaced_controller_serves_the_api_with_the_current_key(rest: Rest) -> None:
    """A fresh disk: the key is read from Secrets Manager again (the rotated one), a new certificate is made."""
    code, output = rest.cluster.replace(CONTROLLER)
    assert code == 0, output
    rest.load_certificate()
    alice = rest.client(lambda: rest.token("alice"))

    def answered() -> bool:
        try:
            return isinstance(rest.call(alice.jobs), list)
        except RestApiError:
            return False

    wait_for("the REST API to answer", answered)
