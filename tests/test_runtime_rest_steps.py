"""The REST API's steps on a controller (training_runtime.steps.rest_api), on a fake root with a recording runner: where
they sit in the plan, the key file, ``auth/jwt`` in each platform's Slurm configuration, the reload after a rotation,
the service's settings and units."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from runtime_fakes import RecordingRunner, fake_node, running_daemon, touch
from training_runtime.errors import StepFailed
from training_runtime.node import Node
from training_runtime.params import ProvisioningParameters
from training_runtime.render.jwt_keys import JWT_KEY_PATH, jwt_keys
from training_runtime.render.slurm_conf import RenderError, slurm_conf_problems
from training_runtime.render.slurm_types import SlurmSettings
from training_runtime.render.slurmdbd_conf import render_slurmdbd_conf
from training_runtime.rest.config import CONFIG_PATH, RestServiceConfig
from training_runtime.rest.params import RestApiParams
from training_runtime.rest.secret import SecretError
from training_runtime.steps import Step
from training_runtime.steps.accounting import SlurmdbdConfig, slurmdbd_conf
from training_runtime.steps.catalog import packages_for, steps_for
from training_runtime.steps.rest_api import RELOAD_MARKER, JwtKey, JwtKeyReload, SlurmAuthInclude, SlurmRestInstalled
from training_runtime.steps.rest_service import RestServiceFiles, service_steps
from training_runtime.steps.slurm import HyperPodAccounting, SlurmConfig, conf_path, slurmdbd

ARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:test-rest-api-key-AbCdEf"
KEY = b"K" * 64
ACCOUNTING = {"accounting": {"enabled": True}}
HYPERPOD_CONF = "SlurmctldHost=controller-1(10.1.0.10)\ninclude accounting.conf\n"


def controller(root: Path, hyperpod: bool = True, options: dict[str, Any] | None = None, rest: bool = True) -> Node:
    node = fake_node(
        root, instance="controller-1", mode="api-driven", options=ACCOUNTING if options is None else options
    )
    if rest:
        node = dataclasses.replace(
            node, params=dataclasses.replace(node.params, rest_api=RestApiParams(ARN, "us-east-1"))
        )
    if hyperpod:
        (root / "opt/sagemaker_cluster").mkdir(parents=True, exist_ok=True)
        touch(root, "/opt/slurm/etc/slurm.conf", HYPERPOD_CONF)
    return node


def names(steps: list[Step]) -> list[str]:
    return [s.name for s in steps]


def test_the_key_comes_before_any_daemon_that_names_it_and_the_service_after_slurmctld(tmp_path: Path) -> None:
    plan = names(steps_for(controller(tmp_path / "h")))
    assert plan.index("rest-api-key") < plan.index("daemon:slurmdbd") < plan.index("daemon:slurmctld")
    assert plan.index("rest-api-slurm-auth") < plan.index("daemon:slurmctld")
    after = plan[plan.index("daemon:slurmctld") :]
    assert [n for n in after if n.startswith("rest-api") or n == "daemon:hyperpod-cdk-rest-api.service"] == [
        "rest-api-key-reload",
        "rest-api-user",
        "rest-api-certificate",
        "rest-api-service",
        "daemon:hyperpod-cdk-rest-api.service",
        "rest-api-key-timer",
        "rest-api-ready",
    ]
    generic = names(steps_for(controller(tmp_path / "g", hyperpod=False)))
    assert "rest-api-key" in generic and "rest-api-slurm-auth" not in generic  # generic: slurm.conf has the keys


def test_nothing_of_it_without_rest_api_or_off_the_controller(tmp_path: Path) -> None:
    plain = names(steps_for(controller(tmp_path / "c", rest=False)))
    assert not [n for n in plain if "rest" in n]
    worker = fake_node(tmp_path / "w", mode="api-driven")
    worker = dataclasses.replace(worker, params=dataclasses.replace(worker.params, rest_api=RestApiParams(ARN, "r")))
    assert not [n for n in names(steps_for(worker)) if "rest" in n]


def test_slurmctld_restarts_when_the_auth_keys_go_into_hyperpods_include_even_without_our_accounting(
    tmp_path: Path,
) -> None:
    node = controller(tmp_path, options={})
    slurmctld = next(s for s in steps_for(node) if s.name == "daemon:slurmctld")
    assert slurmctld.config_files == (conf_path(node, "accounting.conf"),)  # type: ignore[attr-defined]
    plain = next(
        s for s in steps_for(controller(tmp_path / "p", options={}, rest=False)) if s.name == "daemon:slurmctld"
    )
    assert plain.config_files == ()  # type: ignore[attr-defined]


def test_the_key_file_is_slurms_0400_and_only_a_replacement_asks_for_a_reload(tmp_path: Path) -> None:
    node = controller(tmp_path)
    step = JwtKey(read=lambda _node: KEY)
    assert step.needed(node)
    step.apply(node)
    path = node.path(JWT_KEY_PATH)
    assert path.read_bytes() == KEY and stat.S_IMODE(path.stat().st_mode) == 0o400
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not node.path(RELOAD_MARKER).exists()  # the first key: the daemons start with it
    assert not JwtKey(read=lambda _node: KEY).needed(node)
    rotated = JwtKey(read=lambda _node: b"R" * 64)
    assert rotated.needed(node)
    rotated.apply(node)
    assert path.read_bytes() == b"R" * 64 and node.path(RELOAD_MARKER).exists()


def test_an_unreadable_secret_fails_the_step_with_its_reason(tmp_path: Path) -> None:
    def read(_node: Node) -> bytes:
        raise SecretError("GetSecretValue x: AccessDeniedException ... Fix: the role")

    node = controller(tmp_path)
    step = JwtKey(read=read)
    assert step.needed(node)
    with pytest.raises(StepFailed, match="AccessDeniedException"):
        step.apply(node)
    assert not node.path(JWT_KEY_PATH).exists()


def test_the_reload_reconfigures_slurmctld_and_restarts_our_slurmdbd(tmp_path: Path) -> None:
    runner = RecordingRunner()
    node = dataclasses.replace(controller(tmp_path), runner=runner)
    running_daemon(node, slurmdbd(node))
    touch(tmp_path, RELOAD_MARKER)
    ours = JwtKeyReload(slurmdbd_ours=True)
    assert ours.needed(node)
    ours.apply(node)
    assert runner.ran("/opt/slurm/bin/scontrol", "reconfigure") and runner.ran("/opt/slurm/sbin/slurmdbd")
    assert not ours.needed(node)
    touch(tmp_path, RELOAD_MARKER)
    runner.commands.clear()
    JwtKeyReload(slurmdbd_ours=False).apply(node)
    assert runner.ran("/opt/slurm/bin/scontrol", "reconfigure") and not runner.ran("/opt/slurm/sbin/slurmdbd")


def test_hyperpods_include_gets_the_auth_block_and_keeps_its_other_lines(tmp_path: Path) -> None:
    node = controller(tmp_path, options={})
    touch(tmp_path, "/opt/slurm/etc/accounting.conf", "AccountingStorageType=accounting_storage/slurmdbd\n")
    step = SlurmAuthInclude()
    step.apply(node)
    text = node.path("/opt/slurm/etc/accounting.conf").read_text()
    assert text.startswith("AccountingStorageType=accounting_storage/slurmdbd\n")
    assert "AuthAltTypes=auth/jwt\n" in text
    assert "AuthAltParameters=jwt_key=/var/spool/slurm-jwt/jwt_hs256.key,disable_token_creation\n" in text
    assert not step.needed(node)


def test_our_accounting_include_carries_the_same_block(tmp_path: Path) -> None:
    node = controller(tmp_path)
    HyperPodAccounting().apply(node)
    assert not SlurmAuthInclude().needed(node)  # the two writers agree: no flip-flop between them


@pytest.mark.parametrize(
    "slurm_conf, include, reason",
    [
        ("SlurmctldHost=c(1.2.3.4)\n", "", "does not include /opt/slurm/etc/accounting.conf"),
        (HYPERPOD_CONF + "AuthAltTypes=auth/jwt\n", "", "slurm.conf already sets AuthAltTypes"),
        (HYPERPOD_CONF, "authaltparameters = jwks=/x\n", "accounting.conf already sets AuthAltTypes"),
    ],
)
def test_hyperpods_own_auth_settings_are_never_replaced(
    tmp_path: Path, slurm_conf: str, include: str, reason: str
) -> None:
    node = controller(tmp_path, options={})
    touch(tmp_path, "/opt/slurm/etc/slurm.conf", slurm_conf)
    touch(tmp_path, "/opt/slurm/etc/accounting.conf", include)
    with pytest.raises(StepFailed, match=reason):
        SlurmAuthInclude().apply(node)
    assert node.path("/opt/slurm/etc/accounting.conf").read_text() == include


def test_the_generic_slurm_conf_and_slurmdbd_conf_load_auth_jwt(tmp_path: Path) -> None:
    node = controller(tmp_path, hyperpod=False)
    SlurmConfig().apply(node)
    slurm_conf = node.path("/etc/slurm/slurm.conf").read_text()
    assert "\nAuthAltTypes=auth/jwt\n" in slurm_conf
    assert "\nAuthAltParameters=jwt_key=/var/spool/slurm-jwt/jwt_hs256.key,disable_token_creation\n" in slurm_conf
    dbd = slurmdbd_conf(node, "password")
    assert (
        "\nAuthAltTypes=auth/jwt\n" in dbd and "\nAuthAltParameters=jwt_key=/var/spool/slurm-jwt/jwt_hs256.key\n" in dbd
    )
    off = controller(tmp_path / "off", hyperpod=False, rest=False)
    assert "AuthAlt" not in slurmdbd_conf(off, "password")


def test_an_external_databases_slurmdbd_conf_is_rewritten_when_the_api_is_turned_on(tmp_path: Path) -> None:
    external = {
        "accounting": {
            "enabled": True,
            "database": "external",
            "host": "db.example.com",
            "password_secret_arn": "arn:aws:secretsmanager:us-east-1:111122223333:secret:db-AbCdEf",
            "ca_bundle_sha256": hashlib.sha256(b"bundle").hexdigest(),
        }
    }
    node = controller(tmp_path, hyperpod=False, options=external)
    touch(tmp_path, "/etc/slurm/accounting-ca-bundle.pem", "bundle")
    touch(tmp_path, "/etc/slurm/slurmdbd.conf", "StorageHost=db.example.com\n")
    assert SlurmdbdConfig().needed(node)
    touch(tmp_path, "/etc/slurm/slurmdbd.conf", "StorageHost=db.example.com\nAuthAltTypes=auth/jwt\n")
    assert not SlurmdbdConfig().needed(node)
    off = controller(tmp_path, hyperpod=False, options=external, rest=False)
    assert SlurmdbdConfig().needed(off)  # turned off again: the lines go


def test_the_service_settings_name_the_secret_and_no_secret(tmp_path: Path) -> None:
    node = controller(tmp_path)
    files = {path: content for path, content, _ in RestServiceFiles(slurmdbd_ours=True).files(node)}
    config = RestServiceConfig.loads(files[CONFIG_PATH])
    assert (config.port, config.secret_arn, config.region) == (6820, ARN, "us-east-1")
    assert config.openapi_plugins == ("openapi/slurmctld", "openapi/slurmdbd")
    assert config.slurmdbd is not None and config.slurmdbd["unit"] == "slurmdbd"
    assert config.slurmrestd_argv() == [
        "/opt/slurm/sbin/slurmrestd",
        "-a",
        "rest_auth/jwt",
        "-s",
        "openapi/slurmctld,openapi/slurmdbd",
        "unix:/run/hyperpod-cdk-rest/slurmrestd.socket",
    ]
    assert KEY.decode() not in json.dumps(files)
    bare = controller(tmp_path / "bare", options={})
    bare_files = {p: c for p, c, _ in RestServiceFiles(slurmdbd_ours=False).files(bare)}
    bare_config = RestServiceConfig.loads(bare_files[CONFIG_PATH])
    assert bare_config.openapi_plugins == ("openapi/slurmctld",) and bare_config.slurmdbd is None


def test_with_systemd_the_service_and_the_refresh_timer_have_units(tmp_path: Path) -> None:
    node = controller(tmp_path)
    touch(tmp_path, "/run/systemd/system/.present")
    paths = [p for p, _, _ in RestServiceFiles(slurmdbd_ours=True).files(node)]
    assert {
        "/etc/systemd/system/hyperpod-cdk-rest-api.service",
        "/etc/systemd/system/hyperpod-cdk-rest-key.service",
        "/etc/systemd/system/hyperpod-cdk-rest-key.timer",
    } <= set(paths)
    units = {p: c for p, c, _ in RestServiceFiles(slurmdbd_ours=True).files(node)}
    assert "Restart=always" in units["/etc/systemd/system/hyperpod-cdk-rest-api.service"]
    assert "OnUnitActiveSec=300s" in units["/etc/systemd/system/hyperpod-cdk-rest-key.timer"]
    timer = next(s for s in service_steps(node, True) if s.name == "rest-api-key-timer")
    runner = node.runner
    assert isinstance(runner, RecordingRunner)
    runner.respond[("systemctl", "is-enabled")] = (1, "")
    assert timer.needed(node)


def test_the_generic_controller_installs_debians_packages_for_it(tmp_path: Path) -> None:
    assert {"slurmrestd", "slurm-wlm-jwt-plugin", "openssl"} <= set(packages_for(controller(tmp_path, hyperpod=False)))
    assert "slurmrestd" not in packages_for(controller(tmp_path / "off", hyperpod=False, rest=False))


def test_a_parameters_file_round_trip_keeps_the_api(tmp_path: Path) -> None:
    node = controller(tmp_path)
    assert ProvisioningParameters.loads(node.params.dumps()).rest_api == RestApiParams(ARN, "us-east-1")


@pytest.mark.parametrize("path", ["relative/key", "/with space/key", "/a,b", "/a=b", "/a#b"])
def test_a_key_path_slurm_would_split_is_refused_by_every_renderer(path: str) -> None:
    with pytest.raises(ValueError, match="jwt key path"):
        jwt_keys(path)
    with pytest.raises(RenderError, match="jwt_key"):
        render_slurmdbd_conf(
            dbd_host="c", storage_host="localhost", storage_port=3306, storage_user="u", storage_pass="p", jwt_key=path
        )
    settings = SlurmSettings(cluster_name="c", controller_name="c", controller_address="10.0.0.1", jwt_key=path)
    assert any("settings.jwt_key" in p for p in slurm_conf_problems(settings, [], []))


def test_a_slurm_without_slurmrestd_or_auth_jwt_fails_before_any_key_is_written(tmp_path: Path) -> None:
    node = controller(tmp_path)
    step = SlurmRestInstalled()
    assert step.needed(node)
    with pytest.raises(StepFailed) as error:
        step.apply(node)
    assert "no slurmrestd (/opt/slurm/sbin/slurmrestd) and no the auth/jwt plugin" in str(error.value)
    assert "AWS does not document whether HyperPod's AMIs build Slurm's REST API" in str(error.value)
    touch(tmp_path, "/opt/slurm/sbin/slurmrestd")
    touch(tmp_path, "/opt/slurm/lib/slurm/auth_jwt.so")
    assert not step.needed(node)
    touch(tmp_path, "/opt/slurm/etc/slurm.conf", HYPERPOD_CONF + "PluginDir=/srv/slurm-plugins\n")
    assert step.needed(node)  # slurm.conf's PluginDir is where slurmctld looks
    touch(tmp_path, "/srv/slurm-plugins/auth_jwt.so")
    assert not step.needed(node)
    names_ = names(steps_for(node))
    assert names_.index("rest-api-slurm-build") < names_.index("rest-api-key")


def test_the_plan_says_where_aws_is_silent(tmp_path: Path) -> None:
    left = SlurmAuthInclude().left_alone(controller(tmp_path))
    assert len(left) == 1 and left[0].startswith("AWS documents no AuthAlt settings of HyperPod's slurm.conf")
