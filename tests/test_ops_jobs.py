"""``hyperpod-cdk jobs submit|list|show|cancel``: the stack's outputs from moto's CloudFormation, the token and the
jobs from the in-process REST API (tests/rest_support.py); JSON out and the operator commands' exit statuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperpod_cdk.core import stack_outputs as out
from ops_support import ACCOUNT, REGION, Operator, aws_env, moto_url, stack_with_outputs  # noqa: F401
from rest_support import TLS_NAME, FakeRestApi, Served, serve

KEY = b"j" * 64


@pytest.fixture
def served(aws_env: str, tmp_path: Path) -> Iterator[Served]:  # noqa: F811
    api = FakeRestApi(
        key=KEY,
        identities={f"arn:aws:iam::{ACCOUNT}:user/operator": "alice"},
        callers={"testing": ("testing", f"arn:aws:iam::{ACCOUNT}:user/ops/operator")},  # moto's dummy credentials
        region=REGION,
    )
    for running in serve(api, tmp_path):
        outputs = {
            out.CLUSTER_NAME: "ml",
            out.REST_API_ENDPOINT: running.url,
            out.REST_API_TLS_NAME: TLS_NAME,
            out.REST_API_TOKEN_URL: running.mint_url,
        }
        stack_with_outputs("hyperpod-ml", outputs)
        yield running


def jobs(served: Served, *argv: str) -> tuple[int, str, str]:
    result = Operator()("jobs", argv[0], "ml", *argv[1:], "--ca-bundle", str(served.ca))
    return result.code, result.out, result.err


def test_submit_list_show_and_cancel_print_json(served: Served, tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/bash\nsrun python train.py\n")
    code, text, err = jobs(served, "submit", str(script), "-p", "workers", "-N", "2", "-t", "30", "--json")
    assert code == 0, err
    job_id = json.loads(text)["job_id"]
    code, text, _ = jobs(served, "list", "--json")
    assert [(j["job_id"], j["user"], j["state"]) for j in json.loads(text)] == [(job_id, "alice", "PENDING")]
    assert jobs(served, "show", str(job_id), "--json")[0] == 0
    code, text, _ = jobs(served, "cancel", str(job_id), "--json")
    assert code == 0 and json.loads(text) == {"cancelled": True, "job_id": str(job_id)}
    assert json.loads(jobs(served, "show", str(job_id), "--json")[1])["job_state"] == ["CANCELLED"]


def test_wrap_and_env_make_the_script_and_environment(served: Served) -> None:
    code, text, err = jobs(served, "submit", "--wrap", "hostname", "--env", "A=1", "--env", "PATH=/bin")
    assert code == 0 and text.startswith("Submitted batch job "), err
    job = served.api.requests[0][3]["job"]
    assert job["script"] == "#!/bin/bash\nhostname\n" and job["environment"] == ["A=1", "PATH=/bin"]
    assert jobs(served, "submit", "--wrap", "x", "--env", "novalue")[0] == 2


def test_a_refused_token_exits_4_and_a_missing_job_3(served: Served) -> None:
    served.api.identities.clear()
    code, _, err = jobs(served, "list")
    assert code == 4 and "mapped to no Slurm user" in err
    served.api.identities[f"arn:aws:iam::{ACCOUNT}:user/operator"] = "alice"
    code, _, err = jobs(served, "show", "999")
    assert code == 3 and "Invalid job id" in err


def test_a_stack_without_the_rest_api_exits_3(aws_env: str) -> None:  # noqa: F811
    stack_with_outputs("hyperpod-x", {out.CLUSTER_NAME: "x"})
    result = Operator()("jobs", "list", "x")
    assert result.code == 3 and "rest_api" in result.err
