"""Runtime options: one set of rules, used by the config at synth time and by the node at boot."""

from __future__ import annotations

import pytest

from hyperpod_cdk.core.config import parse_config
from hyperpod_cdk.core.errors import ConfigurationError
from training_runtime.options import OptionsError, RuntimeOptions, options_problems, parse_options


def test_defaults_are_slurms_except_return_to_service_and_health_checks_and_accounting_is_off() -> None:
    options = parse_options({})
    assert options == RuntimeOptions()
    slurm = options.slurm
    # Slurm's own defaults ...
    assert (slurm.slurmd_timeout, slurm.message_timeout, slurm.cred_expire, slurm.sched_interval) == (300, 10, 120, 60)
    # ... except these two (Slurm: ReturnToService=0, HealthCheckInterval=0).
    assert (slurm.return_to_service, slurm.health_check_interval) == (2, 300)
    assert not options.accounting.enabled and options.pytorch is None


def test_every_problem_is_reported_with_its_path() -> None:
    problems = options_problems(
        {
            "slurm": {"cred_expire": 10, "bogus": 1, "slurmd_timeout": "fast"},
            "accounting": {"enabled": True, "database": "external"},
            "pytorch": {"version": "latest", "packages": ["numpy==2.1", "not a requirement"]},
            "node_hardware": {"ml.m5.large": {"cpus": 0}},
        }
    )
    joined = "\n".join(problems)
    for expected in (
        "options.slurm.bogus: unknown option",
        "options.slurm.slurmd_timeout: got 'fast'; expected an integer",
        "options.slurm.cred_expire: got 10; must be at least 70",
        "options.accounting.host: required when database is 'external'",
        "options.accounting.password_secret_arn: got None",
        "options.pytorch.version: got 'latest'",
        "options.pytorch.packages[1]: got 'not a requirement'",
        "options.node_hardware.ml.m5.large.cpus: got 0",
    ):
        assert expected in joined
    assert len(problems) == 8


def test_a_password_never_goes_in_the_config() -> None:
    problems = options_problems({"accounting": {"enabled": True, "database": "local", "password_secret_arn": "x"}})
    assert problems == [
        "options.accounting: host, password_secret_arn, ca_bundle_url and ca_bundle_sha256 apply only to database "
        "'external'; the local database lives on the controller, reached over its socket, and its password is "
        "generated there. Fix: remove them, or set database: external"
    ]
    with pytest.raises(OptionsError, match="unknown option"):
        parse_options({"accounting": {"password": "hunter2"}})


def test_the_config_checks_runtime_and_users_before_synth() -> None:
    with pytest.raises(ConfigurationError) as error:
        parse_config(
            {
                "runtime": {"slurm": {"cred_expire": 5}},
                "users": [{"name": "Bad Name", "uid": 5}, {"name": "ok", "uid": 2001}, {"name": "ok", "uid": 2002}],
            }
        )
    text = str(error.value)
    assert "runtime.slurm.cred_expire: got 5" in text
    assert "users[0].name: got 'Bad Name'" in text and "users[0].uid: got 5" in text
    assert "users[2].name: 'ok' is already used by users[1]" in text


def test_no_shared_storage_means_no_lifecycle_driven_runtime() -> None:
    with pytest.raises(ConfigurationError, match="storage: null, but the node runtime needs a shared file system"):
        parse_config({"storage": None, "mode": "lifecycle-driven"})
    parse_config({"storage": None})


@pytest.mark.parametrize(
    ("runtime", "path"),
    [
        ({"emulated_hardware": True}, "runtime.emulated_hardware"),
        ({"spot": {"imds_url": "http://x"}}, "runtime.spot.imds_url"),
    ],
)
def test_the_emulators_knobs_are_no_runtime_options(runtime: dict[str, object], path: str) -> None:
    """They live under hyperpod_cdk.emulation, which only the local cluster writes: a config cannot set them."""
    (problem,) = options_problems(runtime, "runtime")
    assert problem.startswith(path + ": unknown option"), problem


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://download.pytorch.org/whl/cu121", True),
        ("https://pypi.internal.example:8443/simple/", True),
        ("http://download.pytorch.org/whl/cu121", False),
        ("https://user:token@pypi.internal.example/simple", False),
        ("https://pypi.internal.example/simple?x=1", False),
        ("https://download.pytorch.org/whl/cu121\n", False),
        ("https://download.pytorch.org/whl/cu121 --trusted-host x", False),
        ("ftp://mirror.example/", False),
    ],
)
def test_the_pytorch_index_is_https_without_credentials(url: str, ok: bool) -> None:
    """pip installs what the index serves, as root: plain http or a token in the parameters file is refused."""
    problems = options_problems({"pytorch": {"version": "2.5.1", "index_url": url}})
    assert [p.rule for p in problems if p.rule == "RT-PYTORCH-INDEX-URL"] == ([] if ok else ["RT-PYTORCH-INDEX-URL"])
