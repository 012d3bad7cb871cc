"""Slurm's REST API from outside the cluster: the token minter (a Lambda's code), the client and the jobs command."""
