"""Slurm's REST API from outside the cluster: the token minter (a Lambda's code), the client and the jobs command."""

from hyperpod_cdk.rest.client import Endpoints, RestApiError, SlurmRestClient, TokenMinter

__all__ = ["Endpoints", "RestApiError", "SlurmRestClient", "TokenMinter"]
