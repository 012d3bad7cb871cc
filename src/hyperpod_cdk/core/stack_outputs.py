"""The names of a ``TrainingCluster`` stack's outputs: the stack writes them, the tools read them.

``TrainingCluster`` (``stacks/training_cluster.py``) declares each output under these names, and
``hyperpod-cdk training-job-config`` reads them back from the deployed stack; a test compares them with the
synthesized templates' ``Outputs``. Stdlib only, so the operator CLI reads them without loading the config model.
"""

from __future__ import annotations

CLUSTER_NAME = "ClusterName"
CLUSTER_ARN = "ClusterArn"
SSM_TARGET_PREFIX = "SsmTargetPrefix"
LIFECYCLE_BUCKET = "LifecycleBucket"
LIFECYCLE_PREFIX = "LifecyclePrefix"
TRAINING_JOB_SUBNETS = "TrainingJobSubnetIds"
TRAINING_JOB_SECURITY_GROUPS = "TrainingJobSecurityGroupIds"
FSX_FILE_SYSTEM_ID = "FsxFileSystemId"
FSX_DNS_NAME = "FsxDnsName"
FSX_MOUNT_NAME = "FsxMountName"
OPENZFS_FILE_SYSTEM_ID = "OpenZfsFileSystemId"
OPENZFS_DNS_NAME = "OpenZfsDnsName"
PROMETHEUS_WORKSPACE_ID = "PrometheusWorkspaceId"
PROMETHEUS_REMOTE_WRITE_URL = "PrometheusRemoteWriteUrl"
PROMETHEUS_QUERY_URL = "PrometheusQueryUrl"
GRAFANA_URL = "GrafanaUrl"
ALARM_TOPIC_ARN = "AlarmTopicArn"
REST_API_ENDPOINT = "RestApiEndpoint"
REST_API_TLS_NAME = "RestApiTlsName"
REST_API_TOKEN_URL = "RestApiTokenUrl"
REST_API_LOAD_BALANCER = "RestApiLoadBalancerDnsName"
REST_API_KEY_SECRET = "RestApiKeySecretArn"
LOGIN_POOL_HOST_NAME = "LoginPoolHostName"
LOGIN_POOL_LOAD_BALANCER = "LoginPoolLoadBalancerDnsName"
LOGIN_POOL_HOST_KEYS_SECRET = "LoginPoolHostKeysSecretArn"


def data_repository_bucket(pascal_name: str) -> str:
    """The output of a data repository's bucket (``pascal_name``: the repository's name in PascalCase)."""
    return f"DataRepository{pascal_name}Bucket"
