"""Slurm's REST API from outside the cluster: the minting function's code (``minter/``, a Lambda asset that imports
nothing of ours), the client (:mod:`hyperpod_cdk.rest.client`: ``SlurmRestClient``) and what ``jobs`` prints.

Nothing is imported here: the rules read the minter's identity rules without loading the client."""
