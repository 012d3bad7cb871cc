"""The REST API's two small functions: the token minter (a Function URL with ``AWS_IAM`` auth) and the
target registration (EventBridge and a schedule). Their code is ``hyperpod_cdk/rest/minter`` and ``.../targets``,
stdlib and boto3 only, which Lambda's Python runtimes include: "Your code runs in an environment that includes the SDK
for Python (Boto3), with credentials from an AWS Identity and Access Management (IAM) role that you manage" (Lambda
Developer Guide, "Building Lambda functions with Python"). Each has its own role (its log group and
its calls, nothing else; no managed policy) and its own log group, kept a year.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from hyperpod_cdk.constructs.nag import acknowledge_wildcard_resource, lint_accepts
from hyperpod_cdk.constructs.scanners import LOG_GROUP_KEY_REASON, LOG_GROUP_WITHOUT_KEY, skip_checkov
from hyperpod_cdk.rest.minter import handler as minter

REST_CODE = Path(__file__).resolve().parent.parent / "rest"
"""``hyperpod_cdk/rest``: each function's asset is one of its folders (its ``*.py`` files, nothing cached)."""
RUNTIME = lambda_.Runtime.PYTHON_3_14
"""The newest Python runtime CDK names (cdk-nag AwsSolutions-L1 asks for the latest)."""
LOG_RETENTION = logs.RetentionDays.ONE_YEAR
FUNCTION_REASONS = {
    "CKV_AWS_115": "a small, short function; reserved concurrency would take capacity from the account's unreserved "
    "pool (new accounts have little) to cap what IAM authorization already limits",
    "CKV_AWS_116": "invoked synchronously (a Function URL, EventBridge's retries, a schedule): a dead-letter queue "
    "receives only asynchronous invocations' failures, and the caller sees the error itself",
    "CKV_AWS_117": "it calls AWS APIs only (Secrets Manager, IAM, SageMaker, Elastic Load Balancing) and needs nothing "
    "in the cluster's VPC; outside a VPC it needs no NAT gateway or interface endpoints",
    "CKV_AWS_173": "its environment holds no secret (ARNs, names, the identity mapping); Lambda encrypts it at rest "
    "with an AWS-owned key",
}
"""checkov's Lambda findings on these functions, and why each is by design (the template carries the reasons)."""
FUNCTION_WAITS_FOR_ROLE = (
    "W3005",
    "CDK's Function waits for its role and the role's policy (so the first invocation has its permissions); the "
    "role's GetAtt already implies the role part",
)


def function_code(folder: str) -> lambda_.Code:
    """The asset of ``hyperpod_cdk/rest/<folder>``: the package's ``.py`` files, under ``<folder>/``."""
    return lambda_.Code.from_asset(str(REST_CODE), exclude=["*", f"!{folder}", f"!{folder}/*.py"])


class RestFunction(Construct):
    """One of the REST API's functions with its own role and log group.

    :param folder: ``minter`` or ``targets`` (the asset). :param handler: ``<folder>.handler.handler``.
    :param environment: no secret in it. :param timeout_s: the invocation's limit.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        folder: str,
        description: str,
        environment: Mapping[str, str],
        timeout_s: int,
    ) -> None:
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(self, "Logs", retention=LOG_RETENTION, removal_policy=RemovalPolicy.RETAIN)
        skip_checkov(self.log_group, LOG_GROUP_WITHOUT_KEY, LOG_GROUP_KEY_REASON)  # the organization's key unskips
        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="OwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[f"{self.log_group.log_group_arn}"],
            )
        )
        acknowledge_wildcard_resource(
            self.role,
            self.log_group.log_group_arn,
            "the function's own log group: its ARN ends in :* (log streams), the form CloudWatch Logs' reference "
            "gives IAM policies",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler=f"{folder}.handler.handler",
            code=function_code(folder),
            description=description,
            environment=dict(environment),
            timeout=Duration.seconds(timeout_s),
            memory_size=256,
            role=self.role,
            log_group=self.log_group,
        )
        for check_id, reason in FUNCTION_REASONS.items():
            skip_checkov(self.function, check_id, reason)
        lint_accepts(self.function.node.default_child, FUNCTION_WAITS_FOR_ROLE)  # type: ignore[arg-type]


class TokenMinter(Construct):
    """The minting function and its URL (``AWS_IAM``): a caller's IAM identity -> a JWT for its Slurm user.

    :param key_secret: the signing key's secret (its ``SecretString`` is the key).
    :param key_arn: the key that encrypts the secret (the organization's), or None: AWS's.
    :param lifetime_s: each token's lifetime. :param identities: principal key -> Slurm user.
    :param principal_tag: the IAM tag naming a caller's Slurm user, or None. :param tag_users: the users a tag may
        name (the config's users); empty: any but root and slurm.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        key_secret_arn: str,
        key_arn: str | None,
        lifetime_s: int,
        identities: Mapping[str, str],
        principal_tag: str | None,
        tag_users: tuple[str, ...],
    ) -> None:
        super().__init__(scope, id)
        environment = {
            minter.SECRET_ENV: key_secret_arn,
            minter.LIFETIME_ENV: str(lifetime_s),
            minter.IDENTITIES_ENV: json.dumps(dict(sorted(identities.items())), separators=(",", ":")),
        }
        if principal_tag is not None:
            environment[minter.TAG_ENV] = principal_tag
            environment[minter.TAG_USERS_ENV] = json.dumps(sorted(tag_users), separators=(",", ":"))
        self.runner = RestFunction(
            self,
            "Minter",
            folder="minter",
            description="Mints short-lived Slurm JWTs for the IAM callers the cluster config maps",
            environment=environment,
            timeout_s=10,
        )
        self.function = self.runner.function
        role = self.runner.role
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadSigningKey", actions=["secretsmanager:GetSecretValue"], resources=[key_secret_arn]
            )
        )
        if key_arn is not None:
            role.add_to_policy(decrypt_via_secrets_manager(self, key_arn))
        if principal_tag is not None:
            stack = Stack.of(self)
            principals = [
                stack.format_arn(service="iam", region="", resource=kind, resource_name="*")
                for kind in ("role", "user")
            ]
            role.add_to_policy(
                iam.PolicyStatement(
                    sid="ReadCallersTags", actions=["iam:ListRoleTags", "iam:ListUserTags"], resources=principals
                )
            )
            for arn in principals:
                acknowledge_wildcard_resource(
                    role,
                    arn,
                    "rest_api.principal_tag: any role or user of the account may call, and its tags say its Slurm user "
                    "(read only, tags only)",
                )
        self.url = self.function.add_function_url(auth_type=lambda_.FunctionUrlAuthType.AWS_IAM)

    def grant_mint(self, grantee: iam.IGrantable) -> iam.Grant:
        """What a caller needs to call the URL: Lambda's "Control access to Lambda function URLs": with ``AWS_IAM``
        "users who need to invoke your Lambda function URL must have the lambda:InvokeFunctionUrl and
        lambda:InvokeFunction permissions". An invocation that bypasses the URL carries no IAM caller and is
        refused by the function (403)."""
        grant = iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["lambda:InvokeFunctionUrl"],
            resource_arns=[self.function.function_arn],
            conditions={"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}},
        )
        grant.combine(
            iam.Grant.add_to_principal(
                grantee=grantee, actions=["lambda:InvokeFunction"], resource_arns=[self.function.function_arn]
            )
        )
        return grant


def decrypt_via_secrets_manager(
    scope: Construct, key_arn: str, *, sid: str = "DecryptSigningKey", actions: Sequence[str] = ("kms:Decrypt",)
) -> iam.PolicyStatement:
    """``actions`` (``kms:Decrypt``; a writer of the secret adds ``kms:GenerateDataKey``) on a secret's key, only as
    Secrets Manager's caller (its ``kms:ViaService`` in the stack's Region)."""
    stack = Stack.of(scope)
    return iam.PolicyStatement(
        sid=sid,
        actions=list(actions),
        resources=[key_arn],
        conditions={"StringEquals": {"kms:ViaService": f"secretsmanager.{stack.region}.{stack.url_suffix}"}},
    )
