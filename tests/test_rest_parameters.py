"""The parameters file's ``hyperpod_cdk.rest_api``: written by the one builder, filled in by the stack's resources
(the key's secret exists only there), and what a deployment of a config gives the local cluster to fill in."""

from __future__ import annotations

from hyperpod_cdk.core.config import parse_config
from hyperpod_cdk.core.deployment import deployment
from hyperpod_cdk.core.parameters import with_resources
from training_runtime.params import ProvisioningParameters
from training_runtime.rest.params import RestApiParams

ARN = "arn:aws:secretsmanager:us-west-2:111122223333:secret:key-AbCdEf"
REST = {
    "certificate_arn": "arn:aws:acm:us-west-2:111122223333:certificate/12345678-1234-1234-1234-123456789012",
    "domain_name": "slurm.example.com",
    "allowed_cidrs": ["10.0.0.0/16"],
    "identities": [{"principal_arn": "arn:aws:iam::111122223333:role/p", "slurm_user": "p"}],
    "port": 7443,
    "token_lifetime_s": 600,
}


def test_a_deployment_leaves_the_key_to_the_resources_and_says_what_to_write() -> None:
    made = deployment(parse_config({"rest_api": REST}))
    assert made.parameters.rest_api is None  # the secret's ARN is a stack resource's
    params = made.rest_api_parameters(ARN, "us-west-2")
    assert params == RestApiParams(ARN, "us-west-2", port=7443, token_lifetime_s=600)
    written = made.with_resources(fsx_dns_name=None, fsx_mountname=None, fsx=None, metrics=None, rest_api=params)
    assert ProvisioningParameters.from_json(written.to_json()).rest_api == params


def test_off_means_no_rest_api_and_with_resources_keeps_what_is_there() -> None:
    assert deployment(parse_config({})).rest_api_parameters(ARN, "us-west-2") is None
    off = deployment(parse_config({"rest_api": {**REST, "enabled": False}}))
    assert off.rest_api_parameters(ARN, "us-west-2") is None
    kept = RestApiParams(ARN, "us-west-2")
    first = with_resources(off.parameters, fsx_dns_name=None, fsx_mountname=None, fsx=None, metrics=None, rest_api=kept)
    again = with_resources(first, fsx_dns_name=None, fsx_mountname=None, fsx=None, metrics=None)
    assert again.rest_api == kept
