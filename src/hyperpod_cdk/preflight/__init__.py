"""``hyperpod-cdk preflight``: the config checked against the AWS account before ``cdk deploy``.

What makes a HyperPod deployment fail 15-40 minutes in often lives in the account, not the config: a quota,
a full subnet, a training plan in another AZ, a file system, bucket, key, secret, AMI or boundary that is not
what the config says. The rules here (``needs=("aws", ...)``, in the one rule registry) read the account with
read-only calls, concurrently, and report in the registry's Problem shape (docs/operations.md, "preflight").

Modules: ``account`` (calls, memo, errors), ``lookups`` (one per resource), ``online`` (the rule decorator and the
IAM policy), ``resource_checks`` (the guarded look-up shape), ``checks_*`` (the rules), ``runner`` (concurrent
run), ``command`` (the CLI).
"""

from __future__ import annotations


def load() -> None:
    """Register the online rules (``checks_*``) into the one rule registry, after the offline rules in report order.

    The offline rules never import ``preflight`` (its checks read the config the rules judge, so that import would
    close a cycle); whoever runs or lists every rule calls this: ``validate``, ``preflight``, the constructs' checks,
    ``python -m hyperpod_cdk.rules``. Loading twice changes nothing."""
    from hyperpod_cdk.preflight import (
        checks_access,
        checks_capacity,
        checks_network,
        checks_scaling,
        checks_storage,
        checks_updates,
    )
    from hyperpod_cdk.rules.registry import register_modules

    modules = (checks_access, checks_capacity, checks_network, checks_scaling, checks_storage, checks_updates)
    register_modules(tuple(module.__name__ for module in modules))
