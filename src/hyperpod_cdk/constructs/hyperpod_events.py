"""The EventBridge events HyperPod sends about a cluster: the alarms and the REST API's target registration match
them."""

from __future__ import annotations

EVENT_SOURCE = "aws.sagemaker"
CLUSTER_STATE_CHANGE = "SageMaker HyperPod Cluster State Change"
NODE_HEALTH_EVENT = "SageMaker HyperPod Cluster Node Health Event"
CLUSTER_EVENT = "SageMaker HyperPod Cluster Event"
"""EventBridge detail-types HyperPod sends (SageMaker developer guide, "Events that Amazon SageMaker AI sends to
Amazon EventBridge"); cluster events come only from clusters with continuous node provisioning."""
