"""Slurm's REST API on the controller (``slurmrestd`` with ``auth/jwt``): the parameters, the signing key fetched
from Secrets Manager, the TLS terminator in front of ``slurmrestd`` and the key's rotation. Runs on the node's system
Python (stdlib only)."""
