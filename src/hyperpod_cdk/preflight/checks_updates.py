"""Online rule on updates: the config against the cluster it would update, by the same update policies as
``validate --previous`` and ``hyperpod-cdk plan`` (:func:`hyperpod_cdk.aws_data.update_policy.changes`).

When the account has a cluster of the config's name, the deployed config is rebuilt from the stack's template
(CloudFormation DescribeStacks and GetTemplate on the deployment's stack name) and DescribeCluster
(:mod:`hyperpod_cdk.deployed.config`); a change that blocks (the API refuses it, or data would be lost) is an
error, any other change that is not in place a warning. The parameters file is not read here (no S3 action in the
preflight policy): ``hyperpod-cdk plan`` also compares the mode, the FSx mount path and the runtime options.
"""

from __future__ import annotations

from collections.abc import Iterator

from hyperpod_cdk.preflight import lookups
from hyperpod_cdk.preflight.online import account_of, cluster_name, guarded, online_rule
from hyperpod_cdk.rules.view import ClusterView
from training_runtime.problems import ERROR, WARNING, Problem

RULE = "UPD-DEPLOYED"
STACK_MISSING = frozenset({"ValidationError"})
"""CloudFormation's answer for a stack that does not exist ("Stack with id X does not exist")."""


@online_rule(
    RULE,
    "cluster",
    "*",
    actions=(
        "sagemaker:ListClusters",
        "sagemaker:DescribeCluster",
        "cloudformation:DescribeStacks",
        "cloudformation:GetTemplate",
    ),
    source="each field's update policy (docs/operations.md, Update policies: AWS's page and words per field)",
)
def deployed_changes(view: ClusterView) -> Iterator[Problem]:
    """The changes this config makes to the deployed cluster of its name: refused or data-losing ones are errors,
    the others that are not in place (new nodes only, root volumes replaced, irreversible) warnings."""
    config = view.config
    if config is None:
        return
    account = account_of(view)
    name = cluster_name(view)

    def check() -> Iterator[Problem]:
        from hyperpod_cdk.aws_data.update_policy import Kind, changes
        from hyperpod_cdk.core.deployment import deployment
        from hyperpod_cdk.deployed.config import deployed_config
        from hyperpod_cdk.deployed.stack import Deployed, parameters_of, template_body

        described = lookups.deployed_cluster(account, name)
        if described is None:
            return
        stack_name = deployment(config).stack_name
        stacks = account.call("cloudformation", "describe_stacks", StackName=stack_name, missing=STACK_MISSING)
        template, parameters = None, {}
        if stacks:
            parameters = parameters_of(stacks["Stacks"][0])
            body = account.call("cloudformation", "get_template", StackName=stack_name, TemplateStage="Original")
            template = template_body(body["TemplateBody"])
        found = Deployed(stack_name, name, template=template, stack_parameters=parameters, described=described)
        for change in changes(deployed_config(config, found), config):
            policy = change.policy
            if policy.kind is Kind.IN_PLACE:
                continue
            quote = f' AWS: "{policy.quote}" ({policy.source})' if policy.quote else ""
            yield Problem(
                change.path,
                f"changes the deployed cluster {name} (deployed: {change.before!r}): {policy.kind.value}, "
                f"{policy.why}.{quote}",
                got=change.after,
                fix=policy.todo,
                rule=RULE,
                level=ERROR if change.blocks else WARNING,
            )

    yield from guarded(view.path("cluster") or "cluster_name", check, name)
