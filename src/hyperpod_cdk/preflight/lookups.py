"""One function per resource the preflight rules read, each memoized on the account (rules share answers).

Each answers the resource's description, or None when the account has no such resource; a failure raises
:class:`~hyperpod_cdk.preflight.account.Unchecked`.
"""

from __future__ import annotations

import json
from typing import Any

from hyperpod_cdk.preflight.account import Account

NOT_FOUND_EC2 = frozenset(
    {"InvalidSubnetID.NotFound", "InvalidVpcID.NotFound", "InvalidGroup.NotFound", "InvalidAMIID.NotFound"}
)
NOT_FOUND_EC2_MALFORMED = frozenset({"InvalidSubnetID.Malformed", "InvalidGroupId.Malformed", "InvalidAMIID.Malformed"})


def subnet(account: Account, subnet_id: str) -> dict[str, Any] | None:
    def look_up() -> dict[str, Any] | None:
        found = account.call(
            "ec2", "describe_subnets", SubnetIds=[subnet_id], missing=NOT_FOUND_EC2 | NOT_FOUND_EC2_MALFORMED
        )
        return found["Subnets"][0] if found and found["Subnets"] else None

    return account.once(("subnet", subnet_id), look_up)  # type: ignore[no-any-return]


def vpc(account: Account, vpc_id: str) -> dict[str, Any] | None:
    def look_up() -> dict[str, Any] | None:
        found = account.call("ec2", "describe_vpcs", VpcIds=[vpc_id], missing=NOT_FOUND_EC2)
        return found["Vpcs"][0] if found and found["Vpcs"] else None

    return account.once(("vpc", vpc_id), look_up)  # type: ignore[no-any-return]


def security_group(account: Account, group_id: str) -> dict[str, Any] | None:
    def look_up() -> dict[str, Any] | None:
        found = account.call(
            "ec2", "describe_security_groups", GroupIds=[group_id], missing=NOT_FOUND_EC2 | NOT_FOUND_EC2_MALFORMED
        )
        return found["SecurityGroups"][0] if found and found["SecurityGroups"] else None

    return account.once(("sg", group_id), look_up)  # type: ignore[no-any-return]


def image(account: Account, image_id: str) -> dict[str, Any] | None:
    def look_up() -> dict[str, Any] | None:
        found = account.call(
            "ec2", "describe_images", ImageIds=[image_id], missing=NOT_FOUND_EC2 | NOT_FOUND_EC2_MALFORMED
        )
        return found["Images"][0] if found and found["Images"] else None

    return account.once(("ami", image_id), look_up)  # type: ignore[no-any-return]


def file_system(account: Account, file_system_id: str) -> dict[str, Any] | None:
    def look_up() -> dict[str, Any] | None:
        found = account.call(
            "fsx", "describe_file_systems", FileSystemIds=[file_system_id], missing=frozenset({"FileSystemNotFound"})
        )
        return found["FileSystems"][0] if found and found["FileSystems"] else None

    return account.once(("fsx", file_system_id), look_up)  # type: ignore[no-any-return]


def interface_groups(account: Account, interface_ids: list[str]) -> set[str]:
    """The security groups on a file system's network interfaces (FSx keeps them there, not on the file system)."""
    if not interface_ids:
        return set()

    def look_up() -> set[str]:
        found = account.call("ec2", "describe_network_interfaces", NetworkInterfaceIds=list(interface_ids))
        return {g["GroupId"] for eni in found["NetworkInterfaces"] for g in eni.get("Groups", [])}

    return account.once(("eni-groups", tuple(interface_ids)), look_up)  # type: ignore[no-any-return]


def bucket_exists(account: Account, name: str) -> bool:
    """Whether the bucket exists (HeadBucket: 404 when it does not; a 403, another account's bucket or a policy
    that denies us, is Unchecked)."""

    def look_up() -> bool:
        return account.call("s3", "head_bucket", Bucket=name, missing=frozenset({"404", "NoSuchBucket"})) is not None

    return account.once(("bucket", name), look_up)  # type: ignore[no-any-return]


def bucket_region(account: Account, name: str) -> str:
    def look_up() -> str:
        found = account.call("s3", "get_bucket_location", Bucket=name)
        return str(found.get("LocationConstraint") or "us-east-1")  # None means us-east-1 (S3 API reference)

    return account.once(("bucket-region", name), look_up)  # type: ignore[no-any-return]


def bucket_policy(account: Account, name: str) -> dict[str, Any] | None:
    def look_up() -> dict[str, Any] | None:
        found = account.call("s3", "get_bucket_policy", Bucket=name, missing=frozenset({"NoSuchBucketPolicy"}))
        return json.loads(found["Policy"]) if found else None

    return account.once(("bucket-policy", name), look_up)  # type: ignore[no-any-return]


def bucket_kms_key(account: Account, name: str) -> str | None:
    """The KMS key of the bucket's default encryption (SSE-KMS), or None (SSE-S3, or the aws/s3 key)."""

    def look_up() -> str | None:
        found = account.call(
            "s3",
            "get_bucket_encryption",
            Bucket=name,
            missing=frozenset({"ServerSideEncryptionConfigurationNotFoundError"}),
        )
        for rule in (found or {}).get("ServerSideEncryptionConfiguration", {}).get("Rules", []):
            default = rule.get("ApplyServerSideEncryptionByDefault", {})
            if default.get("SSEAlgorithm", "").startswith("aws:kms") and default.get("KMSMasterKeyID"):
                return str(default["KMSMasterKeyID"])
        return None

    return account.once(("bucket-kms", name), look_up)  # type: ignore[no-any-return]


def kms_key(account: Account, key: str) -> dict[str, Any] | None:
    def look_up() -> dict[str, Any] | None:
        found = account.call("kms", "describe_key", KeyId=key, missing=frozenset({"NotFoundException"}))
        return found["KeyMetadata"] if found else None

    return account.once(("kms", key), look_up)  # type: ignore[no-any-return]


def kms_policy(account: Account, key: str) -> dict[str, Any]:
    def look_up() -> dict[str, Any]:
        return json.loads(account.call("kms", "get_key_policy", KeyId=key, PolicyName="default")["Policy"])  # type: ignore[no-any-return]

    return account.once(("kms-policy", key), look_up)  # type: ignore[no-any-return]


def secret(account: Account, arn: str) -> dict[str, Any] | None:
    def look_up() -> dict[str, Any] | None:
        return account.call(  # type: ignore[no-any-return]
            "secretsmanager", "describe_secret", SecretId=arn, missing=frozenset({"ResourceNotFoundException"})
        )

    return account.once(("secret", arn), look_up)  # type: ignore[no-any-return]


def secret_keys(account: Account, arn: str) -> list[str] | None:
    """The secret's JSON keys (the value itself is dropped at once), or None when it is not a JSON object."""

    def look_up() -> list[str] | None:
        found = account.call("secretsmanager", "get_secret_value", SecretId=arn)
        try:
            value = json.loads(found.get("SecretString") or "")
        except ValueError:
            return None
        return sorted(value) if isinstance(value, dict) else None

    return account.once(("secret-keys", arn), look_up)  # type: ignore[no-any-return]


def managed_policy(account: Account, arn: str) -> dict[str, Any] | None:
    def look_up() -> dict[str, Any] | None:
        found = account.call("iam", "get_policy", PolicyArn=arn, missing=frozenset({"NoSuchEntity"}))
        return found["Policy"] if found else None

    return account.once(("policy", arn), look_up)  # type: ignore[no-any-return]


def workspace(account: Account, workspace_id: str) -> dict[str, Any] | None:
    def look_up() -> dict[str, Any] | None:
        found = account.call(
            "amp", "describe_workspace", workspaceId=workspace_id, missing=frozenset({"ResourceNotFoundException"})
        )
        return found["workspace"] if found else None

    return account.once(("aps", workspace_id), look_up)  # type: ignore[no-any-return]


def training_plan(account: Account, name: str) -> dict[str, Any] | None:
    def look_up() -> dict[str, Any] | None:
        return account.call(  # type: ignore[no-any-return]
            "sagemaker", "describe_training_plan", TrainingPlanName=name, missing=frozenset({"ResourceNotFound"})
        )

    return account.once(("plan", name), look_up)  # type: ignore[no-any-return]


def cluster_quotas(account: Account) -> dict[str, float]:
    """SageMaker's applied quotas by name (``ml.p5.48xlarge for cluster usage`` -> 4.0)."""

    def look_up() -> dict[str, float]:
        quotas = account.pages("service-quotas", "list_service_quotas", "Quotas", ServiceCode="sagemaker")
        return {q["QuotaName"]: float(q["Value"]) for q in quotas}

    return account.once(("quotas",), look_up)  # type: ignore[no-any-return]


def clusters_in_use(account: Account) -> list[dict[str, Any]]:
    """Every HyperPod cluster in the Region, described (their groups hold instances against the quotas)."""

    def look_up() -> list[dict[str, Any]]:
        summaries = list(account.pages("sagemaker", "list_clusters", "ClusterSummaries"))
        found = []
        for summary in summaries:
            described = account.call(
                "sagemaker",
                "describe_cluster",
                ClusterName=summary["ClusterName"],
                missing=frozenset({"ResourceNotFound"}),
            )
            if described:
                found.append(described)
        return found

    return account.once(("clusters",), look_up)  # type: ignore[no-any-return]


def deployed_cluster(account: Account, name: str) -> dict[str, Any] | None:
    """The described HyperPod cluster called ``name`` in the Region (from :func:`clusters_in_use`), or None."""
    return next((c for c in clusters_in_use(account) if c.get("ClusterName") == name), None)
