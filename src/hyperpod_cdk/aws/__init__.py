"""AWS helpers shared by the operator CLI (:mod:`hyperpod_cdk.ops`) and ``hyperpod-cdk publish``
(:mod:`hyperpod_cdk.publishing`): the boto3 session and clients, AWS errors as one line each, exit statuses.

Importing this package imports neither boto3 nor rich: each helper imports boto3 when it runs.
"""
