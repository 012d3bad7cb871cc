"""The config of the REST API's local-cluster test (tests/test_local_rest.py), shared with the emulator's unit tests of
its overlay: a controller and one worker, accounting, two users in two teams, ``rest_api`` on."""

from __future__ import annotations

from typing import Any

import boto3

from hyperpod_local.control_plane import local as control_plane
from hyperpod_local.state import ClusterHandle

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


def secrets_client(cluster: ClusterHandle) -> Any:
    """boto3's Secrets Manager client of the cluster's emulated control plane, with the instance role's keys: the
    REST key's secret (:func:`~hyperpod_local.control_plane.local.rest_key_arn`) read and rotated as the minting
    function and an operator do."""
    env = control_plane.client_env(cluster)
    return boto3.client(
        "secretsmanager",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=env["AWS_SESSION_TOKEN"],
        region_name=env["AWS_REGION"],
    )


def rest_key(cluster: ClusterHandle) -> bytes:
    """The REST key secret's current value (``AWSCURRENT``), read on the host as the minting function reads it."""
    arn = control_plane.rest_key_arn(cluster)
    return str(secrets_client(cluster).get_secret_value(SecretId=arn)["SecretString"]).encode()
