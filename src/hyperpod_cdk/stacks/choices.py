"""LaunchChoices: a config's ``parameters`` section as ``CfnParameter``s, and the values they stand for.

The parameters are ``scope``'s own children, so their logical IDs are the IDs of
:mod:`hyperpod_cdk.core.template_parameters` wherever the composition is used. Where the config makes no
choice, each accessor returns the config's own value, so a config without ``parameters`` builds the
same template as before.
"""

from __future__ import annotations

import dataclasses

from aws_cdk import CfnCondition, CfnParameter, Fn, Stack
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from hyperpod_cdk.constructs.group_api import capacity_document
from hyperpod_cdk.core.config import ClusterConfig, DataRepositoryConfig
from hyperpod_cdk.core.deployment import may_be_spot
from hyperpod_cdk.core.template_parameters import (
    CLUSTER_NAME_ID,
    STORAGE_CAPACITY_ID,
    TemplateParameter,
    bucket_name_id,
    bucket_prefix_id,
    group_capacity_id,
    group_count_id,
    group_type_id,
    interface_metadata,
    template_parameters,
)
from hyperpod_cdk.model import Capacity, InstanceGroup

INTERFACE = "AWS::CloudFormation::Interface"


class LaunchChoices:
    """The template parameters of ``config`` added to ``scope`` (none without a ``parameters`` section).

    :param scope: the stack (or ``ProductStack``) that holds the parameters.
    :param config: the whole cluster, already checked (the rules have judged every allowed value).
    """

    def __init__(self, scope: Construct, config: ClusterConfig) -> None:
        self.config = config
        self.specs = template_parameters(config)
        self.parameters = {spec.logical_id: _parameter(scope, spec) for spec in self.specs}
        self.scope = scope
        if self.specs:
            # The console lists the choices in groups, with labels instead of logical IDs.
            Stack.of(scope).add_metadata(INTERFACE, interface_metadata(self.specs))

    def _string(self, logical_id: str, value: str) -> str:
        parameter = self.parameters.get(logical_id)
        return parameter.value_as_string if parameter is not None else value

    @property
    def cluster_name(self) -> str:
        """The HyperPod cluster's name: the launching team's choice, or the config's."""
        return self._string(CLUSTER_NAME_ID, self.config.cluster_name)

    def instance_groups(self) -> list[InstanceGroup]:
        """The config's groups with each chosen count and type as the parameter's value."""
        groups = []
        for group in self.config.instance_groups:
            count = self.parameters.get(group_count_id(group.name))
            changes: dict[str, object] = {}
            chosen_type = self.parameters.get(group_type_id(group.name))
            if chosen_type is not None:
                changes["instance_type"] = chosen_type.value_as_string
            if count is not None:
                changes["count"] = count.value_as_number
            if may_be_spot(self.config, group.name):
                # As the parameters file names it (hyperpod_cdk.core.deployment.launched_group).
                changes["capacity"] = Capacity.SPOT
            groups.append(dataclasses.replace(group, **changes))  # type: ignore[arg-type]
        return groups

    def choose_capacity(self, cluster: sagemaker.CfnCluster) -> None:
        """Each group whose capacity is chosen at launch gets ``CapacityRequirements`` from the parameter:
        ``Fn::If`` on a condition that the value is ``spot`` (CloudFormation has no other way to pick between
        two objects)."""
        for index, group in enumerate(self.config.instance_groups):
            parameter = self.parameters.get(group_capacity_id(group.name))
            if parameter is None:
                continue
            is_spot = CfnCondition(
                self.scope,
                f"{parameter.node.id}IsSpot",
                expression=Fn.condition_equals(parameter.value_as_string, str(Capacity.SPOT)),
            )
            cluster.add_property_override(
                f"InstanceGroups.{index}.CapacityRequirements",
                Fn.condition_if(
                    is_spot.logical_id, capacity_document(Capacity.SPOT), capacity_document(Capacity.ON_DEMAND)
                ),
            )

    def storage_capacity_gib(self, value: int) -> int:
        parameter = self.parameters.get(STORAGE_CAPACITY_ID)
        # A number token is a float that stands for an int (CloudFormation's constraints judge it).
        return parameter.value_as_number if parameter is not None else value  # type: ignore[return-value]

    def bucket_name(self, repository: DataRepositoryConfig) -> str | None:
        if repository.bucket_name is None:
            return None
        return self._string(bucket_name_id(repository.name), repository.bucket_name)

    def bucket_prefix(self, repository: DataRepositoryConfig) -> str:
        return self._string(bucket_prefix_id(repository.name), repository.bucket_prefix)


def _parameter(scope: Construct, spec: TemplateParameter) -> CfnParameter:
    return CfnParameter(
        scope,
        spec.logical_id,
        type=spec.type,
        default=spec.default,
        description=spec.description,
        allowed_values=list(spec.allowed_values) if spec.allowed_values is not None else None,
        allowed_pattern=spec.allowed_pattern,
        min_length=spec.min_length,
        max_length=spec.max_length,
        min_value=spec.min_value,
        max_value=spec.max_value,
        constraint_description=spec.constraint_description,
    )
