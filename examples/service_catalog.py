"""A platform team's Service Catalog product: the cluster as a ``ProductStack`` in a portfolio, launched
through a launch-constraint role, published without CDK bootstrap (no bootstrap bucket, roles or version
check; no assets or Lambda functions in the product).

The product's template and the cluster's lifecycle files live in the platform team's bucket (context
``publish_bucket`` and ``publish_prefix``); publish them and the portfolio stack's template with
``hyperpod_cdk.publishing.command.publish(build, target, ...)``, then deploy the portfolio stack's template.

Synthesize: ``npx --no-install cdk synth --app "python examples/service_catalog.py" -c publish_bucket=NAME``
"""

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_servicecatalog as servicecatalog

from hyperpod_cdk import ClusterConfig, OrganizationRules, PublishTarget, TrainingCluster
from hyperpod_cdk.constructs.nag import acknowledge
from hyperpod_cdk.constructs.scanners import skip_checkov
from hyperpod_cdk.organization import boundary_of
from hyperpod_cdk.publishing.synth import publish_target
from hyperpod_cdk.stacks import published_synthesizer

CLUSTER = ClusterConfig.model_validate(
    {
        "cluster_name": "team-training",
        "instance_groups": [
            {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
            {"name": "gpu", "role": "compute", "instance_type": "ml.g5.8xlarge", "count": 2, "partition": "gpu"},
        ],
        "tags": {"cost-center": "ml-platform"},
    }
)


ROLE_BOUNDARY = "hyperpod-catalog-role-boundary"
"""The managed policy every role the product creates carries as its permissions boundary; the launch role may
create and change ``SC-*`` roles only with it (a name, not a reference: the product's template is a separate one)."""
BOUNDARY_REASON = (
    "A permissions boundary caps what the product's roles may ever do, whatever the launch role attaches: everything "
    "their own policies grant, except any change to identities, the organization or the account; what each role may "
    "do is its own policy's (the nodes' execution role, the flow-log role). Replace it with the organization's own "
    "boundary where there is one"
)
EC2_ON_ANY_RESOURCE = (
    "The product creates a VPC, subnets, route tables, gateways, an Elastic IP, security groups, a VPC endpoint and "
    "flow logs whose IDs do not exist before the launch, and many EC2 creation calls touch several resource "
    "types at once; the EC2 actions are listed one by one instead (no ec2:* but Describe*)"
)


def target_of(app: cdk.App) -> PublishTarget:
    """The platform bucket and prefix ``hyperpod-cdk publish`` gives the app (defaults for a look at the template)."""
    return publish_target(app, PublishTarget("platform-templates-example", "hyperpod/"))


def build(app: cdk.App) -> list[cdk.Stack]:
    target = target_of(app)
    stack = cdk.Stack(
        app,
        "hyperpod-catalog",
        synthesizer=published_synthesizer(target),
        description="Service Catalog portfolio of the platform team's HyperPod training cluster (hyperpod-cdk)",
    )
    product_stack = servicecatalog.ProductStack(stack, "ClusterProduct")
    # Every role of the product carries a boundary, and the launch role can create or change no SC-* role without
    # it: the organization's, when OrganizationRules on the app set one, else this product's own.
    boundary = boundary_of(stack)
    if boundary is None:
        boundary = role_boundary(stack).managed_policy_arn
        OrganizationRules(permission_boundary_arn=boundary_arn(product_stack)).apply(product_stack)
    TrainingCluster(product_stack, config=CLUSTER, published=target)
    product = servicecatalog.CloudFormationProduct(
        stack,
        "Product",
        product_name="HyperPod Slurm training cluster",
        owner="ML platform team",
        description="A SageMaker HyperPod Slurm cluster with FSx for Lustre, vetted by the platform team",
        product_versions=[
            servicecatalog.CloudFormationProductVersion(
                product_version_name="v1",
                cloud_formation_template=servicecatalog.CloudFormationTemplate.from_product_stack(product_stack),
            )
        ],
    )
    portfolio = servicecatalog.Portfolio(
        stack, "Portfolio", display_name="ML training clusters", provider_name="ML platform team"
    )
    portfolio.add_product(product)
    portfolio.set_launch_role(product, launch_role(stack, target, boundary))
    return [stack]


def boundary_arn(scope: cdk.Stack) -> str:
    """The boundary's ARN in ``scope``'s account."""
    return f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:policy/{ROLE_BOUNDARY}"


def role_boundary(stack: cdk.Stack) -> iam.ManagedPolicy:
    """The permissions boundary of the product's roles (IAM user guide, "Permissions boundaries for IAM entities":
    "A permissions boundary is an advanced feature for using a managed policy to set the maximum permissions that
    an identity-based policy can grant to an IAM entity")."""
    boundary = iam.ManagedPolicy(
        stack,
        "ProductRoleBoundary",
        managed_policy_name=ROLE_BOUNDARY,
        description="Permissions boundary of the roles the HyperPod training cluster product creates",
        statements=[
            iam.PolicyStatement(sid="AtMostWhatTheirPoliciesGrant", actions=["*"], resources=["*"]),
            iam.PolicyStatement(
                sid="NoIdentityOrganizationOrAccountChanges",
                effect=iam.Effect.DENY,
                actions=["iam:*", "organizations:*", "account:*"],
                resources=["*"],
            ),
        ],
    )
    acknowledge(boundary, "AwsSolutions-IAM5[Action::*]", BOUNDARY_REASON)
    acknowledge(boundary, "AwsSolutions-IAM5[Resource::*]", BOUNDARY_REASON)
    # checkov reads a boundary as a grant: credentials exposure, data exfiltration, permissions management,
    # privilege escalation and write access "without constraints" (CKV_AWS_107 to 111).
    for check in ("CKV_AWS_107", "CKV_AWS_108", "CKV_AWS_109", "CKV_AWS_110", "CKV_AWS_111"):
        skip_checkov(boundary, check, BOUNDARY_REASON)
    return boundary


ROLE_WRITES = (
    "iam:AttachRolePolicy",
    "iam:CreateRole",
    "iam:DeleteRolePolicy",
    "iam:DetachRolePolicy",
    "iam:PutRolePermissionsBoundary",
    "iam:PutRolePolicy",
)
"""The launch role's actions that write a role's permissions: the role must carry the product's boundary."""


def launch_role(stack: cdk.Stack, target: PublishTarget, boundary: str) -> iam.Role:
    """The role Service Catalog's CloudFormation stack runs as, so end users need no rights on these resources.

    It must be able to create, tag, update and delete what the product's template holds: a VPC with its
    subnets, route tables, internet and NAT gateways, an Elastic IP, security groups, an S3 gateway endpoint
    and flow logs (to a log group, through a role); an FSx for Lustre file system with data repository
    associations; an encrypted data bucket; the nodes' execution role; and the HyperPod cluster. IAM and
    CloudFormation actions are limited to Service Catalog's stacks (``SC-*``) and the roles they name; EC2,
    FSx, S3-bucket, Logs and SageMaker creation name resources that do not exist yet, so those are on ``*``.

    ``role/SC-*`` is a name space every Service Catalog product of the account shares, so the actions that write a
    role's permissions are allowed only for a role that carries ``boundary`` (``iam:PermissionsBoundary``), as the
    IAM user guide's delegation example has it ("CreateOrChangeOnlyWithBoundary": create and change only with
    ``"Condition": {"StringEquals": {"iam:PermissionsBoundary": "arn:aws:iam::123456789012:policy/
    XCompanyBoundaries"}}``): another product's roles, which lack it, cannot be given permissions through this
    role, and no role it creates can do more than the boundary allows. Reading, tagging and deleting roles stay
    unconditioned, as deleting a user does in that example.
    """
    role = iam.Role(
        stack,
        "LaunchRole",
        assumed_by=iam.ServicePrincipal("servicecatalog.amazonaws.com"),
        description="Service Catalog launch constraint of the HyperPod training cluster product",
    )
    account = f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}"
    service_catalog_roles = f"{account}:role/SC-*"
    statements = {
        "Stacks": (
            [
                "cloudformation:CreateStack",
                "cloudformation:DeleteStack",
                "cloudformation:DescribeStackEvents",
                "cloudformation:DescribeStacks",
                "cloudformation:GetTemplateSummary",
                "cloudformation:SetStackPolicy",
                "cloudformation:UpdateStack",
                "cloudformation:ValidateTemplate",
            ],
            [stack.format_arn(service="cloudformation", resource="stack", resource_name="SC-*")],
        ),
        "ReadPublishedObjects": (
            ["s3:GetObject"],
            [f"arn:{cdk.Aws.PARTITION}:s3:::{target.bucket_name}/{target.prefix}*"],
        ),
        "NodeAndFlowLogRoles": (
            ["iam:DeleteRole", "iam:GetRole", "iam:GetRolePolicy", "iam:TagRole", "iam:UntagRole"],
            [service_catalog_roles],
        ),
        "Network": (
            [
                f"ec2:{action}"
                for action in (
                    "AllocateAddress",
                    "AssociateRouteTable",
                    "AttachInternetGateway",
                    "AuthorizeSecurityGroupEgress",
                    "AuthorizeSecurityGroupIngress",
                    "CreateFlowLogs",
                    "CreateInternetGateway",
                    "CreateNatGateway",
                    "CreateRoute",
                    "CreateRouteTable",
                    "CreateSecurityGroup",
                    "CreateSubnet",
                    "CreateTags",
                    "CreateVpc",
                    "CreateVpcEndpoint",
                    "DeleteFlowLogs",
                    "DeleteInternetGateway",
                    "DeleteNatGateway",
                    "DeleteRoute",
                    "DeleteRouteTable",
                    "DeleteSecurityGroup",
                    "DeleteSubnet",
                    "DeleteTags",
                    "DeleteVpc",
                    "DeleteVpcEndpoints",
                    "Describe*",
                    "DetachInternetGateway",
                    "DisassociateRouteTable",
                    "ModifySubnetAttribute",
                    "ModifyVpcAttribute",
                    "ReleaseAddress",
                    "RevokeSecurityGroupEgress",
                    "RevokeSecurityGroupIngress",
                )
            ],
            ["*"],
        ),
        "FileSystem": (
            [
                "fsx:CreateDataRepositoryAssociation",
                "fsx:CreateFileSystem",
                "fsx:DeleteDataRepositoryAssociation",
                "fsx:DeleteFileSystem",
                "fsx:DescribeDataRepositoryAssociations",
                "fsx:DescribeFileSystems",
                "fsx:TagResource",
                "fsx:UpdateFileSystem",
            ],
            [
                stack.format_arn(service="fsx", resource="file-system", resource_name="*"),
                stack.format_arn(service="fsx", resource="association", resource_name="*"),
            ],
        ),
        # CloudFormation names what it creates after the stack: SC-<account>-pp-<id>-... (buckets in lower case).
        "DataBucket": (
            [
                "s3:CreateBucket",
                "s3:DeleteBucketPolicy",
                "s3:GetBucketPolicy",
                "s3:PutBucketOwnershipControls",
                "s3:PutBucketPolicy",
                "s3:PutBucketPublicAccessBlock",
                "s3:PutBucketTagging",
                "s3:PutBucketVersioning",
                "s3:PutEncryptionConfiguration",
            ],
            [f"arn:{cdk.Aws.PARTITION}:s3:::sc-*"],
        ),
        "FlowLogGroup": (
            [
                "logs:CreateLogGroup",
                "logs:DeleteLogGroup",
                "logs:DescribeLogGroups",
                "logs:PutRetentionPolicy",
                "logs:TagResource",
            ],
            [
                stack.format_arn(
                    service="logs",
                    resource="log-group",
                    resource_name="SC-*",
                    arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                )
            ],
        ),
        "Cluster": (
            [
                "sagemaker:AddTags",
                "sagemaker:CreateCluster",
                "sagemaker:DeleteCluster",
                "sagemaker:DescribeCluster",
                "sagemaker:UpdateCluster",
            ],
            [stack.format_arn(service="sagemaker", resource="cluster", resource_name="*")],
        ),
    }
    for sid, (actions, resources) in statements.items():
        role.add_to_policy(iam.PolicyStatement(sid=sid, actions=actions, resources=resources))
    role.add_to_policy(
        iam.PolicyStatement(
            sid="CreateOrChangeRolesOnlyWithTheBoundary",
            actions=list(ROLE_WRITES),
            resources=[service_catalog_roles],
            conditions={"StringEquals": {"iam:PermissionsBoundary": boundary}},
        )
    )
    # The nodes' execution role goes to HyperPod and the flow-log role to VPC Flow Logs, and nowhere else.
    role.add_to_policy(
        iam.PolicyStatement(
            sid="PassCreatedRoles",
            actions=["iam:PassRole"],
            resources=[service_catalog_roles],
            conditions={
                "StringEquals": {"iam:PassedToService": ["sagemaker.amazonaws.com", "vpc-flow-logs.amazonaws.com"]}
            },
        )
    )
    # FSx and its S3 links use service-linked roles the first time an account creates them.
    role.add_to_policy(
        iam.PolicyStatement(
            sid="FsxServiceLinkedRoles",
            actions=["iam:CreateServiceLinkedRole"],
            resources=[f"{account}:role/aws-service-role/*fsx.amazonaws.com/*"],
        )
    )
    reasons = {
        "AwsSolutions-IAM5[Resource::*]": EC2_ON_ANY_RESOURCE,
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:fsx:<AWS::Region>:<AWS::AccountId>:file-system/*]": (
            "the product's file system gets its ID at launch"
        ),
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:fsx:<AWS::Region>:<AWS::AccountId>:association/*]": (
            "the file system's data repository associations get their IDs at launch"
        ),
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:SC-*]": (
            "CloudFormation names the flow-log group after Service Catalog's stack (SC-*)"
        ),
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::sc-*]": (
            "CloudFormation names the data bucket after Service Catalog's stack, in lower case (sc-*)"
        ),
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:cluster/*]": (
            "a HyperPod cluster's ARN ends with an ID assigned at creation"
        ),
        "AwsSolutions-IAM5[Action::ec2:Describe*]": "CloudFormation reads back every EC2 resource it creates",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:cloudformation:<AWS::Region>:<AWS::AccountId>:stack/SC-*]": (
            "Service Catalog names its provisioned products' stacks SC-<account>-pp-<id>"
        ),
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:role/SC-*]": (
            "the roles the product creates are named after Service Catalog's stack (SC-*)"
        ),
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:role/aws-service-role/"
        "*fsx.amazonaws.com/*]": ("FSx's service-linked roles (file system and S3 data repositories)"),
        f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::{target.bucket_name}/{target.prefix}*]": (
            "the published product templates and lifecycle files are content-addressed under this prefix"
        ),
    }
    for finding, reason in reasons.items():
        acknowledge(role, finding, reason)
    # The same choice as IaC scanners see it (cloudsplaining's "write access without constraints").
    skip_checkov(role.node.find_child("DefaultPolicy"), "CKV_AWS_111", EC2_ON_ANY_RESOURCE)
    return role


if __name__ == "__main__":
    application = cdk.App()
    build(application)
    application.synth()
