"""The directory (issue #41) on the node's side: its rules, the parameters contract, the rendered sssd.conf,
nsswitch and PAM lines, and the steps on a fake root (the bind password in sssd.conf only, 0600; a clash between a
declared user and a directory user stops the bootstrap; pam_slurm_adopt only on compute nodes, only when Slurm's
configuration meets Slurm's conditions)."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from runtime_fakes import CLUSTER_GROUPS, RecordingRunner, fake_node, running_daemon, touch
from training_runtime.aws_secrets import SecretError, SecretsManager, password_of, s3_object
from training_runtime.directory import Directory, directory_problems, parse_directory, secret_resource
from training_runtime.errors import StepFailed
from training_runtime.hyperpod_facts import HYPERPOD_MARKER
from training_runtime.node import HYPERPOD
from training_runtime.params import ProvisioningParameters
from training_runtime.render.sssd_conf import ADOPT_LINE, nsswitch_with_sss, sshd_pam_with_adopt, sssd_conf
from training_runtime.scaler.sigv4 import Credentials
from training_runtime.steps.catalog import steps_for
from training_runtime.steps.directory import (
    EC2_INSTANCE_CONNECT,
    SSHD_DROPIN,
    SSSD,
    SSSD_CONF,
    DirectoryClash,
    SshdDirectoryKeys,
    SssdConfig,
)
from training_runtime.steps.directory_compute import SSHD_PAM, PamSlurmAdopt, unmet
from training_runtime.team_model import Team, Teams
from training_runtime.teams import teams_problems
from training_runtime.users import User

ARN = "arn:aws:secretsmanager:us-west-2:123456789012:secret:ldap-bind-AbCdEf"
PASSWORD = "s3cr3t-bind-Pa55"
RAW: dict[str, Any] = {
    "uris": ["ldaps://ldap1.corp.example.com", "ldaps://ldap2.corp.example.com:6360"],
    "search_base": "dc=corp,dc=example,dc=com",
    "bind_dn": "cn=reader,ou=svc,dc=corp,dc=example,dc=com",
    "bind_password_secret_arn": ARN,
}


def directory(**change: Any) -> Directory:
    found = parse_directory({**RAW, **change})
    assert found is not None
    return found


def rules(**change: Any) -> list[str]:
    return [p.rule for p in directory_problems({**RAW, **change})]


# --- the rules ---------------------------------------------------------------------------------------------------


def test_the_smallest_directory_is_valid_with_sssds_defaults() -> None:
    found = directory()
    assert found.schema == "rfc2307" and found.homes == "shared" and found.ssh_public_key_attribute == "sshPublicKey"
    assert found.group_sync_interval_s == 300 and not found.start_tls and found.secret_region == "us-west-2"


def test_ldap_without_start_tls_is_refused_with_the_reason_and_accepted_with_it() -> None:
    (problem,) = directory_problems({**RAW, "uris": ["ldap://ldap1.corp.example.com"]})
    assert problem.rule == "DIR-URI" and problem.path == "directory.uris[0]" and "clear text" in problem
    found = directory(uris=["ldap://ldap1.corp.example.com"], start_tls=True)
    assert "ldap_id_use_start_tls = true" in sssd_conf(found, PASSWORD, "/fsx/home", None)
    assert rules(start_tls=True) == ["DIR-URI", "DIR-URI"], "StartTLS over ldaps:// is a mistake"
    assert rules(uris=["http://x"]) == ["DIR-URI"] and rules(uris=[]) == ["DIR-URI"]


def test_a_literal_password_is_refused_and_never_shown() -> None:
    (problem,) = directory_problems({**RAW, "bind_password_secret_arn": PASSWORD})
    assert problem.rule == "DIR-SECRET" and PASSWORD not in problem
    assert rules(bind_password_secret_arn="arn:aws:ssm:us-west-2:123456789012:parameter/x") == ["DIR-SECRET"]


def test_every_problem_is_reported_at_once() -> None:
    found = rules(search_base="corp", schema="openldap", access_filter="uid=*", ca_certificate="x", colour=1)
    assert sorted(found) == ["DIR-CA", "DIR-DN", "DIR-FILTER", "DIR-SCHEMA", "DIR-SHAPE"]


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"id_mapping": True}, "DIR-SCHEMA"),
        ({"group_sync_interval_s": 301}, "DIR-SHAPE"),
        ({"group_sync_interval_s": 4}, "DIR-SHAPE"),
        ({"homes": "local"}, "DIR-SHAPE"),
        ({"access_filter": "(a=b))("}, "DIR-FILTER"),
        ({"bind_password_kms_key_arn": "alias/x"}, "DIR-SECRET"),
    ],
)
def test_each_bad_value_breaks_its_rule(change: dict[str, Any], rule: str) -> None:
    assert rules(**change) == [rule]


def test_ad_with_id_mapping_and_a_ca_in_s3_or_inline_are_accepted() -> None:
    assert rules(schema="ad", id_mapping=True, ca_certificate="s3://corp-pki/ca.pem") == []
    assert rules(ca_certificate="-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----") == []


def test_a_partial_secret_arn_gets_secrets_managers_six_characters_in_iam() -> None:
    assert secret_resource(ARN) == ARN
    partial = "arn:aws:secretsmanager:us-west-2:123456789012:secret:ldap-bind"
    assert secret_resource(partial) == partial + "-??????"


def test_a_team_may_name_a_directory_group_instead_of_users() -> None:
    assert teams_problems([{"name": "vision", "directory_group": "vision-researchers"}], True, []) == []
    (problem,) = teams_problems([{"name": "vision", "users": []}], True, [])
    assert problem.rule == "TEAM-USERS" and "directory_group" in problem.fix
    assert [p.rule for p in teams_problems([{"name": "v", "directory_group": "a:b"}], True, [])] == ["TEAM-SHAPE"]


def test_the_parameters_file_carries_the_directory_and_its_arn_not_a_password() -> None:
    params = ProvisioningParameters(
        cluster_name="c",
        mode="api-driven",
        groups=CLUSTER_GROUPS,
        directory=directory(),
        teams=Teams(True, (Team("vision", (), directory_group="vision-researchers"),)),
    )
    text = params.dumps()
    again = ProvisioningParameters.loads(text)
    assert again.directory == params.directory and again.teams == params.teams
    assert json.loads(text)["hyperpod_cdk"]["directory"]["bind_password_secret_arn"] == ARN
    broken = json.loads(text)
    broken["hyperpod_cdk"]["directory"]["uris"] = ["ldap://x"]
    with pytest.raises(Exception, match=r"directory\.uris"):
        ProvisioningParameters.from_json(broken)


# --- the rendered files ------------------------------------------------------------------------------------------


def test_sssd_conf_holds_the_settings_and_ignores_system_ids() -> None:
    text = sssd_conf(directory(), PASSWORD, "/fsx/home/", "/etc/sssd/ca.pem")
    for line in (
        "ldap_uri = ldaps://ldap1.corp.example.com, ldaps://ldap2.corp.example.com:6360",
        "ldap_search_base = dc=corp,dc=example,dc=com",
        "ldap_default_bind_dn = cn=reader,ou=svc,dc=corp,dc=example,dc=com",
        "ldap_default_authtok = " + PASSWORD,
        "ldap_tls_reqcert = demand",
        "ldap_tls_cacert = /etc/sssd/ca.pem",
        "ldap_id_mapping = false",
        "min_id = 1000",
        "override_homedir = /fsx/home/%u",
        "ldap_user_ssh_public_key = sshPublicKey",
        "access_provider = permit",
        "services = nss, pam, ssh",
    ):
        assert line in text.splitlines(), line
    ad = sssd_conf(directory(schema="ad", id_mapping=True, access_filter="(memberOf=cn=hpc)", homes="directory",
                             ssh_public_key_attribute=None), PASSWORD, "/fsx/home", None).splitlines()  # fmt: skip
    assert {"ldap_schema = ad", "ldap_id_mapping = true", "ldap_referrals = false", "access_provider = ldap",
            "ldap_access_filter = (memberOf=cn=hpc)", "services = nss, pam"} <= set(ad)  # fmt: skip
    assert not any(line.startswith(("override_homedir", "ldap_tls_cacert", "ldap_user_ssh")) for line in ad)
    with pytest.raises(ValueError):
        sssd_conf(directory(), "two\nlines", "/fsx/home", None)


def test_nsswitch_gets_sss_after_files_once() -> None:
    given = "passwd:         files systemd\ngroup:          files systemd\nhosts:          files dns\n"
    once = nsswitch_with_sss(given)
    assert "passwd:        files systemd sss" in once and "group:         files systemd sss" in once
    assert "hosts:          files dns" in once and nsswitch_with_sss(once) == once
    assert "passwd:        files sss" in nsswitch_with_sss("hosts: files\n")


def test_pam_slurm_adopt_goes_last_in_sshds_account_stack_once() -> None:
    given = "@include common-auth\naccount required pam_nologin.so\n@include common-account\n@include common-session\n"
    once = sshd_pam_with_adopt(given)
    lines = once.splitlines()
    assert lines.index(ADOPT_LINE) == lines.index("@include common-account") + 2
    assert lines[-1] == "@include common-session" and sshd_pam_with_adopt(once) == once


# --- the steps ---------------------------------------------------------------------------------------------------


def directory_node(tmp_path: Path, instance: str = "workers-1", **kw: Any) -> Any:
    params = ProvisioningParameters(
        cluster_name="test", mode="lifecycle-driven", groups=CLUSTER_GROUPS, directory=directory(**kw)
    )
    return fake_node(tmp_path / "root", instance=instance, params=params)


def test_the_bind_password_is_written_to_sssd_conf_alone_root_only_and_converges(tmp_path: Path) -> None:
    node = directory_node(tmp_path, ca_certificate="-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----")
    touch(node.root, "/etc/nsswitch.conf", "passwd: files\ngroup: files\n")
    reads: list[str] = []
    step = SssdConfig(node.params.directory, password=lambda n, d: reads.append(d.bind_password_secret_arn) or PASSWORD)
    assert step.needed(node)
    step.apply(node)
    conf = node.path(SSSD_CONF)
    assert os.stat(conf).st_mode & 0o777 == 0o600
    holding = [p for p in node.root.rglob("*") if p.is_file() and PASSWORD.encode() in p.read_bytes()]
    assert holding == [conf]
    assert not step.needed(node) and reads == [ARN], "read once per run"
    assert "sss" in node.path("/etc/nsswitch.conf").read_text()
    assert not any(PASSWORD in " ".join(c) for c in node.runner.commands)


def test_a_declared_user_the_directory_also_has_stops_the_bootstrap(tmp_path: Path) -> None:
    runner = RecordingRunner(
        {
            ("getent", "-s", "sss", "passwd"): (2, ""),
            ("getent", "-s", "sss", "group"): (2, ""),
            ("getent", "-s", "sss", "passwd", "2001"): (0, "carol:*:2001:2001:Carol:/home/carol:/bin/bash\n"),
        }
    )
    node = fake_node(tmp_path / "root", runner=runner)
    clash = DirectoryClash([User("alice", 2001, 2001), User("bob", 2002, 2002)])
    assert clash.needed(node)
    clashed = r"declared user alice \(uid 2001\) and directory user carol \(uid 2001\)"
    with pytest.raises(StepFailed, match=clashed) as error:
        clash.apply(node)
    assert "bob" not in str(error.value) and "never renumbers" in str(error.value)
    assert not DirectoryClash([User("bob", 2002, 2002)]).needed(node)
    runner.respond[("getent", "-s", "sss", "group", "dave")] = (0, "dave:*:5005:\n")
    (group,) = DirectoryClash([User("dave", 2004, 2004)]).clashes(node)
    assert group == "declared user dave's group dave (gid 2004) and the directory's group dave (gid 5005)"


def test_sssd_starts_after_its_configuration_and_restarts_when_it_changes(tmp_path: Path) -> None:
    node = directory_node(tmp_path)
    running_daemon(node, SSSD)
    names = [s.name for s in steps_for(node)]
    assert names.index("directory-sssd") < names.index("daemon:sssd.service") < names.index("directory-clash")
    assert names.index("directory-clash") < names.index("pam-slurm-adopt")


@pytest.mark.parametrize("hyperpod", [True, False], ids=["hyperpod", "generic"])
@pytest.mark.parametrize(("instance", "adopt"), [("workers-1", True), ("login-1", False), ("controller-1", False)])
def test_pam_slurm_adopt_is_planned_on_compute_nodes_only(
    tmp_path: Path, instance: str, adopt: bool, hyperpod: bool
) -> None:
    if hyperpod:  # HyperPod's login nodes run slurmd too (the dev partition): the same block of the plan
        touch(tmp_path / "root", HYPERPOD_MARKER)
    node = directory_node(tmp_path, instance=instance)
    assert (node.platform == HYPERPOD) is hyperpod
    names = [s.name for s in steps_for(node)]
    assert ("pam-slurm-adopt" in names) is adopt
    assert "directory-sssd" in names and "directory-pam" in names


CONTAINED = "PrologFlags = Alloc,Contain\nProctrackType = proctrack/cgroup\nTaskPlugin = task/affinity,task/cgroup\n"


def adopt_node(tmp_path: Path, config: str) -> Any:
    runner = RecordingRunner()
    node = fake_node(tmp_path / "root", runner=runner)
    runner.respond[(node.slurm.command("scontrol"), "show", "config")] = (0, config)
    touch(node.root, "/lib/x86_64-linux-gnu/security/pam_slurm_adopt.so")
    touch(node.root, "/usr/sbin/sshd").chmod(0o755)
    touch(node.root, SSHD_PAM, "@include common-auth\n@include common-account\n@include common-session\n")
    touch(node.root, "/etc/pam.d/common-session", "session optional pam_systemd.so\n")
    return node


def test_pam_slurm_adopt_goes_in_when_slurm_meets_its_conditions(tmp_path: Path) -> None:
    node = adopt_node(tmp_path, CONTAINED)
    step = PamSlurmAdopt()
    assert step.needed(node) and step.left_alone(node) == []
    step.apply(node)
    assert ADOPT_LINE in node.path(SSHD_PAM).read_text().splitlines()
    assert node.runner.ran("pam-auth-update", "--disable", "systemd")


def test_without_prolog_contain_pam_is_left_alone_and_said_so(tmp_path: Path) -> None:
    node = adopt_node(
        tmp_path, "PrologFlags = Alloc\nProctrackType = proctrack/linuxproc\nTaskPlugin = task/affinity\n"
    )
    step = PamSlurmAdopt()
    assert not step.needed(node)
    (said,) = step.left_alone(node)
    assert "PrologFlags has no Contain" in said and "proctrack/linuxproc" in said and "task/cgroup" in said
    assert unmet({"PrologFlags": "Contain", "ProctrackType": "proctrack/cgroup", "TaskPlugin": "task/cgroup"}) == []


# --- Secrets Manager ---------------------------------------------------------------------------------------------


class _Secrets(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []
    answer: dict[str, Any] = {}

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Secrets.seen.append({"headers": dict(self.headers.items()), "body": json.loads(body)})
        data = json.dumps(_Secrets.answer).encode()
        self.send_response(400 if "__type" in _Secrets.answer else 200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def secrets_url() -> Any:
    server = HTTPServer(("127.0.0.1", 0), _Secrets)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Secrets.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_get_secret_value_is_signed_for_secrets_manager_in_the_secrets_region(secrets_url: str) -> None:
    _Secrets.answer = {"SecretString": json.dumps({"password": PASSWORD, "username": "reader"})}
    client = SecretsManager(secrets_url, "us-west-2", lambda: Credentials("AKIDEXAMPLE", "secret", "token"))
    assert password_of(client.secret_string(ARN), ARN) == PASSWORD
    (request,) = _Secrets.seen
    assert request["headers"]["X-Amz-Target"] == "secretsmanager.GetSecretValue"
    assert "/us-west-2/secretsmanager/aws4_request" in request["headers"]["Authorization"]
    assert request["body"] == {"SecretId": ARN}


def test_a_refused_read_names_the_secret_and_the_code_never_a_value(secrets_url: str) -> None:
    _Secrets.answer = {"__type": "AccessDeniedException", "message": "no"}
    client = SecretsManager(secrets_url, "us-west-2", lambda: Credentials("AKID", "s"), attempts=1)
    with pytest.raises(SecretError, match="AccessDeniedException") as error:
        client.secret_string(ARN)
    assert ARN in str(error.value)
    assert password_of("plain-value\n", ARN) == "plain-value"
    with pytest.raises(SecretError):
        password_of(json.dumps({"user": "x"}), ARN)
    for bad in ("", "two\nlines", " padded"):
        with pytest.raises(SecretError, match="one line"):
            password_of(bad, ARN)


def test_sshd_keys_from_the_directory_are_written_checked_and_ec2_instance_connects_override_reported(
    tmp_path: Path,
) -> None:
    node = directory_node(tmp_path)
    step = SshdDirectoryKeys(node.params.directory)
    assert not step.needed(node) and "sshd is not installed" in step.left_alone(node)[0]
    touch(node.root, "/usr/sbin/sshd").chmod(0o755)
    assert step.needed(node)
    step.apply(node)
    text = node.path(SSHD_DROPIN).read_text()
    assert "AuthorizedKeysCommand /usr/bin/sss_ssh_authorizedkeys" in text and "CommandUser nobody" in text
    assert node.runner.ran("/usr/sbin/sshd", "-t") and not step.needed(node)
    touch(node.root, EC2_INSTANCE_CONNECT)
    assert "ec2-instance-connect" in step.left_alone(node)[0]


class _Bucket(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        _Bucket.seen.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}})
        data = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
        self.send_response(200 if self.path == "/pki/ca.pem" else 403)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_the_ca_certificate_is_read_from_s3_with_a_signed_get() -> None:
    server = HTTPServer(("127.0.0.1", 0), _Bucket)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        keys = lambda: Credentials("AKIDEXAMPLE", "secret", "token")  # noqa: E731
        body = s3_object("corp-pki", "pki/ca.pem", "us-west-2", keys, endpoint=url)
        assert body.startswith(b"-----BEGIN CERTIFICATE-----")
        (request,) = _Bucket.seen
        assert "/us-west-2/s3/aws4_request" in request["headers"]["authorization"]
        assert request["headers"]["x-amz-content-sha256"] == hashlib.sha256(b"").hexdigest()
        with pytest.raises(SecretError, match="HTTP 403"):
            s3_object("corp-pki", "other.pem", "us-west-2", keys, endpoint=url)
    finally:
        server.shutdown()
        server.server_close()
