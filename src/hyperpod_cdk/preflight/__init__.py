"""``hyperpod-cdk preflight``: the config checked against the AWS account before ``cdk deploy``.

What makes a HyperPod deployment fail 15-40 minutes in often lives in the account, not the config: a quota,
a full subnet, a training plan in another AZ, a file system, bucket, key, secret, AMI or boundary that is not
what the config says. The rules here (``needs=("aws", ...)``, in the one rule registry) read the account with
read-only calls, concurrently, and report in the registry's Problem shape (docs/operations.md, "preflight").

Modules: ``account`` (calls, memo, errors), ``lookups`` (one per resource), ``online`` (the rule decorator and the
IAM policy), ``resource_checks`` (the guarded look-up shape), ``checks_*`` (the rules), ``runner`` (concurrent
run), ``command`` (the CLI).
"""
