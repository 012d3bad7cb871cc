"""The API reference's limits on each request, checked before an operation acts; one ``ValidationException``
naming every problem (the service's own messages are not documented; ours name the field, value and limit).

botocore checks types and required members on the client; it does not check list maxima or patterns, so a
request botocore sends can still break these. Each limit cites its page of the API reference (base
https://docs.aws.amazon.com/sagemaker/latest/APIReference/) or botocore's service model (``service-2.json``,
the authority for shapes). These are the AWS side's one copy: the operator CLI's tests fake AWS with them too
(``tests/ops_support.py``), never with the CLI's own constants, so a wrong limit in the CLI shows.
"""

from __future__ import annotations

import re
from typing import Any

from hyperpod_cdk.aws_data.api_constraints import check_request, validation_message
from hyperpod_local.control_plane.model import validation

ADD_GROUPS_MAX = 5
"""BatchAddClusterNodes ``NodesToAdd``: "You can specify up to 5 instance groups in a single request"."""
ADD_NODES_MAX = 50
"""BatchAddClusterNodes: "with a maximum of 50 nodes total across all instance groups"; ``IncrementTargetCountBy``
1 to 50 (API_AddClusterNodeSpecification.html)."""
DELETE_IDS_MAX = 50
"""BatchDeleteClusterNodes: "a combined maximum of 50 identifiers" of ``NodeIds`` and ``NodeLogicalIds``
(the model's list maxima, 3000 and 99, are wider than the page)."""
REBOOT_IDS_MAX = 25
"""BatchRebootClusterNodes / BatchReplaceClusterNodes: 1 to 25 ``NodeIds`` and 1 to 25 ``NodeLogicalIds``."""
INSTANCE_COUNT_MAX = 6758
"""``ClusterInstanceCount``: 0 to 6758 (service-2.json)."""
UPDATE_GROUPS_MAX = 100
"""UpdateCluster ``InstanceGroups``: 1 to 100 (service-2.json)."""
LIST_MAX = 100
"""ListClusterNodes and ListClusterEvents ``MaxResults``: 1 to 100."""
TAGS_MAX = 50
"""AddTags ``Tags``: 0 to 50 per call, and "a maximum of 50 tags" per resource (API_AddTags.html)."""
CLIENT_TOKEN = re.compile(r"[\x21-\x7E]{0,64}")
NODE_ID = re.compile(r"i-[a-f0-9]{8}(?:[a-f0-9]{9})?")
LOGICAL_ID = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9\-]*[a-zA-Z0-9]")


def api_model(operation: str, params: dict[str, Any]) -> None:
    """The request against the SageMaker API model's constraints on the members hyperpod-cdk emits (the generated
    table of :mod:`hyperpod_cdk.aws_data.api_constraints`: botocore's service-2.json alone, as the API has no
    CloudFormation
    schema): one ValidationException in the service's words, e.g. ``1 validation error detected: Value 'a_b' at
    'instanceGroups.1.member.instanceGroupName' failed to satisfy constraint: Member must satisfy regular
    expression pattern: ...``. The format (count, ``Value '<v>' at '<member>'``, members in lowerCamel, list items
    from 1 as ``<n>.member``, several joined by ``; ``) is the one real SageMaker answers quote, e.g.
    https://github.com/aws-samples/sagemaker-ml-workflow-with-apache-airflow/issues/3 ("2 validation errors
    detected: Value '…' at 'modelName' failed to satisfy constraint: Member must have length less than or equal to
    63; …") and https://github.com/ministryofjustice/cloud-platform-environments/pull/22667 (``'tags.10.member.
    value'``). AWS does not document it."""
    found = check_request(params, operation, cloudformation=False)
    if found:
        raise validation(validation_message(found))


def check(problems: list[str]) -> None:
    if problems:
        raise validation("; ".join(problems))


def integer(params: dict[str, Any], key: str, low: int, high: int | None, problems: list[str]) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bound = f"{low} to {high}" if high is not None else f"{low} or more"
        problems.append(f"{key}: got {value!r}; allowed: an integer from {bound}")
        return None
    return value


def id_lists(params: dict[str, Any], each_max: int | None, combined_max: int | None) -> tuple[list[str], list[str]]:
    """``NodeIds`` and ``NodeLogicalIds`` of a batch call, checked: at least one identifier, the page's maxima,
    the model's patterns."""
    ids, logical = list(params.get("NodeIds") or []), list(params.get("NodeLogicalIds") or [])
    problems: list[str] = []
    if not ids and not logical:
        problems.append("NodeIds or NodeLogicalIds: give at least one node")
    for key, values in (("NodeIds", ids), ("NodeLogicalIds", logical)):
        if each_max is not None and len(values) > each_max:
            problems.append(f"{key}: {len(values)} given; allowed: 1 to {each_max}")
        pattern = NODE_ID if key == "NodeIds" else LOGICAL_ID
        bad = [v for v in values if not isinstance(v, str) or not pattern.fullmatch(v)]
        if bad:
            problems.append(f"{key}: {bad[:3]!r} do not match {pattern.pattern}")
    if combined_max is not None and len(ids) + len(logical) > combined_max:
        problems.append(
            f"NodeIds and NodeLogicalIds: {len(ids) + len(logical)} given; allowed: a combined maximum of "
            f"{combined_max}"
        )
    check(problems)
    return ids, logical
