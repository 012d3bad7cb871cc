"""The SageMaker calls the scaler makes, over AWS's JSON protocol with SigV4 (stdlib only).

``POST /`` with ``X-Amz-Target: SageMaker.<Operation>`` and ``Content-Type: application/x-amz-json-1.1``, signed
for the service ``sagemaker`` (the SageMaker API reference, "Common parameters"/"Common errors"; the endpoint is
``https://api.sagemaker.<region>.amazonaws.com``, AWS General Reference, "Amazon SageMaker endpoints"). The
endpoint, the credentials, the clock and the sleep are injected, so the local cluster's emulated control plane
and the tests' fake serve it the same way AWS does.

Errors are classified (:class:`ApiError.kind`): ``throttling`` and ``server`` are retried here with capped
exponential backoff and full jitter (AWS: "Error retries and exponential backoff in AWS"); ``capacity``,
``quota``, ``validation``, ``auth``, ``not-found`` and ``credentials`` (no instance role credentials from the
metadata service: nothing was sent) go back to the service, which backs off and reports them.
"""

from __future__ import annotations

import datetime
import json
import random
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from training_runtime.hyperpod_facts import ADD_GROUPS_MAX, ADD_NODES_MAX, DELETE_NODES_MAX
from training_runtime.scaler.policy import AddNodes
from training_runtime.scaler.sigv4 import Credentials, CredentialsError, sign

SERVICE = "sagemaker"
TARGET_PREFIX = "SageMaker."
CONTENT_TYPE = "application/x-amz-json-1.1"
TIMEOUT_S = 30.0

THROTTLING, SERVER, CAPACITY, QUOTA, VALIDATION, AUTH, NOT_FOUND, NETWORK, CREDENTIALS = (
    "throttling",
    "server",
    "capacity",
    "quota",
    "validation",
    "auth",
    "not-found",
    "network",
    "credentials",
)
RETRIED = (THROTTLING, SERVER, NETWORK)
UNKNOWN_OUTCOME = (SERVER, NETWORK)
"""Kinds after which a call may have been carried out (no answer, or a 5xx, after the retries): a throttled, refused
or unsigned call was not."""
CODES = {
    THROTTLING: ("ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded"),
    CAPACITY: ("InsufficientCapacity", "InsufficientInstanceCapacity", "InsufficientCapacityError"),
    QUOTA: ("ResourceLimitExceeded", "ServiceQuotaExceededException", "LimitExceededException"),
    AUTH: (
        "AccessDeniedException",
        "AccessDenied",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "IncompleteSignature",
        "MissingAuthenticationToken",
    ),
    NOT_FOUND: ("ResourceNotFound", "ResourceNotFoundException"),
    VALIDATION: ("ValidationException", "ValidationError", "ConflictException", "SerializationException"),
}


def endpoint_for(region: str) -> str:
    return "https://api.sagemaker.{}.amazonaws.com/".format(region)


def region_of(arn: str) -> str:
    """``arn:aws:sagemaker:us-west-2:123456789012:cluster/abc`` -> ``us-west-2``."""
    parts = arn.split(":")
    if len(parts) < 6 or parts[0] != "arn" or parts[2] != SERVICE or not parts[3]:
        raise ValueError("not a SageMaker cluster ARN: {!r}".format(arn))
    return parts[3]


class ApiError(RuntimeError):
    def __init__(self, kind: str, code: str, message: str, status: int = 0) -> None:
        super().__init__("{} ({}): {}".format(code, kind, message))
        self.kind = kind
        self.code = code
        self.message = message
        self.status = status


def classify(status: int, code: str) -> str:
    for kind, codes in CODES.items():
        if code in codes:
            return kind
    if status == 429:
        return THROTTLING
    if status >= 500:
        return SERVER
    if status in (401, 403):
        return AUTH
    return VALIDATION


@dataclass(frozen=True)
class Node:
    """One ``ListClusterNodes`` summary."""

    instance_id: str
    group: str
    status: str
    hostname: Optional[str] = None
    """``PrivateDnsHostname`` (``ip-10-1-2-3.<region>.compute.internal``)."""


@dataclass(frozen=True)
class Group:
    """One ``DescribeCluster`` ``InstanceGroups`` entry (the fields the scaler reads)."""

    name: str
    current: int
    target: int
    status: str
    training_plan: Optional[str] = None


@dataclass(frozen=True)
class DeleteResult:
    deleted: Tuple[str, ...]
    failed: Mapping[str, str]
    """Instance id -> ``Code: Message`` from the response's ``Failed`` list."""


class AwsJsonClient:
    """One AWS service over the JSON protocol (``POST /`` with ``X-Amz-Target: <target_prefix><Operation>``), signed
    with SigV4 for :attr:`service`; retried as the module says. :class:`SageMaker` is the scaler's; the REST API's
    key and the directory's bind password with another (:class:`training_runtime.aws_secrets.SecretsManager`)."""

    service = SERVICE
    target_prefix = TARGET_PREFIX

    def __init__(
        self,
        endpoint: str,
        region: str,
        credentials: Callable[[], Credentials],
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        attempts: int = 5,
        base_s: float = 1.0,
        cap_s: float = 20.0,
    ) -> None:
        self.endpoint = endpoint if endpoint.endswith("/") else endpoint + "/"
        self.region = region
        self.credentials = credentials
        self.clock = clock
        self.sleep = sleep
        self.attempts = attempts
        self.base_s = base_s
        self.cap_s = cap_s

    def _once(self, operation: str, payload: Mapping[str, Any]) -> Dict[str, Any]:
        body = json.dumps(payload, sort_keys=True).encode("utf-8")
        now = datetime.datetime.fromtimestamp(self.clock(), tz=datetime.timezone.utc)
        headers = {"Content-Type": CONTENT_TYPE, "X-Amz-Target": self.target_prefix + operation}
        try:
            credentials = self.credentials()
        except CredentialsError as error:
            raise ApiError(CREDENTIALS, "NoCredentials", str(error)) from None
        signed = sign("POST", self.endpoint, headers, body, credentials, self.region, self.service, now)
        request = urllib.request.Request(self.endpoint, data=body, method="POST", headers=signed)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                text = response.read().decode("utf-8")
        except urllib.error.HTTPError as error:
            raw = error.read().decode("utf-8", "replace")
            try:
                data = json.loads(raw)
            except ValueError:
                data = {}
            kind_header = error.headers.get("x-amzn-ErrorType") or ""
            code = str(data.get("__type") or kind_header or "HTTP{}".format(error.code)).split("#")[-1].split(":")[0]
            message = str(data.get("message") or data.get("Message") or raw[:300])
            raise ApiError(classify(error.code, code), code, message, error.code) from None
        except (urllib.error.URLError, socket.timeout, OSError) as error:
            raise ApiError(NETWORK, "Network", str(error)) from None
        result = json.loads(text) if text.strip() else {}
        if not isinstance(result, dict):
            raise ApiError(SERVER, "BadResponse", "not a JSON object: {!r}".format(text[:200]))
        return result

    def call(self, operation: str, payload: Mapping[str, Any]) -> Dict[str, Any]:
        """One operation, retried on throttling, 5xx and network errors; other errors are raised at once."""
        attempt = 1
        while True:
            try:
                return self._once(operation, payload)
            except ApiError as error:
                if error.kind not in RETRIED or attempt >= self.attempts:
                    raise
                self.sleep(random.uniform(0, min(self.cap_s, self.base_s * 2 ** (attempt - 1))))
                attempt += 1


class SageMaker(AwsJsonClient):
    """The SageMaker operations the scaler calls."""

    def describe_cluster(self, cluster: str) -> Tuple[str, List[Group]]:
        """(``ClusterArn``, the instance groups)."""
        data = self.call("DescribeCluster", {"ClusterName": cluster})
        groups = [
            Group(
                name=str(g.get("InstanceGroupName")),
                current=int(g.get("CurrentCount") or 0),
                target=int(g.get("TargetCount") or 0),
                status=str(g.get("Status") or ""),
                training_plan=g.get("TrainingPlanArn") or None,
            )
            for g in data.get("InstanceGroups") or []
        ]
        return str(data.get("ClusterArn") or ""), groups

    def list_cluster_nodes(self, cluster: str) -> List[Node]:
        """Every node, following ``NextToken``."""
        nodes: List[Node] = []
        token: Optional[str] = None
        while True:
            payload: Dict[str, Any] = {"ClusterName": cluster, "MaxResults": 100}
            if token:
                payload["NextToken"] = token
            data = self.call("ListClusterNodes", payload)
            for item in data.get("ClusterNodeSummaries") or []:
                status = (item.get("InstanceStatus") or {}).get("Status") or ""
                nodes.append(
                    Node(
                        str(item.get("InstanceId")),
                        str(item.get("InstanceGroupName")),
                        str(status),
                        item.get("PrivateDnsHostname") or None,
                    )
                )
            token = data.get("NextToken") or None
            if not token:
                return nodes

    def batch_add(self, cluster: str, call: Sequence[AddNodes], token: str) -> Dict[str, Any]:
        """``BatchAddClusterNodes`` for one batch (:func:`policy.batch_adds`); ``token`` is its ClientToken.
        A ``Failed`` entry (``InstanceGroupNotFound``, ``InvalidInstanceGroupStatus``…) raises a validation error."""
        if not call or len(call) > ADD_GROUPS_MAX or sum(a.count for a in call) > ADD_NODES_MAX:
            raise ValueError(
                "a BatchAddClusterNodes call takes 1..{} groups and <= {} nodes; got {}".format(
                    ADD_GROUPS_MAX, ADD_NODES_MAX, call
                )
            )
        payload = {
            "ClusterName": cluster,
            "ClientToken": token,
            "NodesToAdd": [{"InstanceGroupName": a.group, "IncrementTargetCountBy": a.count} for a in call],
        }
        data = self.call("BatchAddClusterNodes", payload)
        failed = data.get("Failed") or []
        if failed:
            first = failed[0]
            code = str(first.get("ErrorCode") or "Failed")
            raise ApiError(VALIDATION, code, "{}: {}".format(first.get("InstanceGroupName"), first.get("Message")))
        return data

    def batch_delete(self, cluster: str, instance_ids: Sequence[str]) -> DeleteResult:
        """``BatchDeleteClusterNodes`` (<= :data:`DELETE_NODES_MAX` ids); the per-node ``Failed`` entries come back,
        not raised."""
        if not instance_ids or len(instance_ids) > DELETE_NODES_MAX:
            raise ValueError(
                "a BatchDeleteClusterNodes call takes 1..{} ids; got {}".format(DELETE_NODES_MAX, len(instance_ids))
            )
        data = self.call("BatchDeleteClusterNodes", {"ClusterName": cluster, "NodeIds": list(instance_ids)})
        failed = {
            str(f.get("NodeId")): "{}: {}".format(f.get("Code"), f.get("Message")) for f in data.get("Failed") or []
        }
        return DeleteResult(tuple(str(i) for i in data.get("Successful") or []), failed)

    def add_tags(self, arn: str, tags: Mapping[str, str]) -> None:
        self.call("AddTags", {"ResourceArn": arn, "Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())]})
