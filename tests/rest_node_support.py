"""The config of the REST API's local-cluster test (tests/test_local_rest.py), shared with the emulator's unit tests of
its overlay: a controller and one worker, accounting, two users in two teams, ``rest_api`` on."""

from __future__ import annotations

from typing import Any

CONFIG: dict[str, Any] = {
    "cluster_name": "rest-cluster",
    "instance_groups": [
        {"name": "controller-machine", "role": "controller", "instance_type": "ml.m5.large", "count": 1},
        {"name": "worker-group-1", "role": "compute", "instance_type": "ml.c5.4xlarge", "count": 1, "partition": "cpu"},
    ],
    "runtime": {"accounting": {"enabled": True}},
    "users": [{"name": "alice", "uid": 2101}, {"name": "bob", "uid": 2102}],
    "teams": [{"name": "vision", "users": ["alice"]}, {"name": "nlp", "users": ["bob"]}],
    "enforce_accounts": True,
    "rest_api": {
        "certificate_arn": "arn:aws:acm:us-west-2:111122223333:certificate/12345678-1234-1234-1234-123456789012",
        "domain_name": "slurm.example.com",
        "allowed_cidrs": ["10.0.0.0/8"],
        "identities": [
            {"principal_arn": "arn:aws:iam::111122223333:role/vision-pipelines", "slurm_user": "alice"},
            {"principal_arn": "arn:aws:iam::111122223333:role/nlp-pipelines", "slurm_user": "bob"},
        ],
    },
}
