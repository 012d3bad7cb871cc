#!/usr/bin/env python3
"""Apply known breaking changes to a scratch copy of the repository and show that the tests catch each.

Each mutation is one small edit that breaks a behaviour the project relies on (most of them once went
unnoticed by the whole suite). For each, this script copies the repository (the files ``git ls-files``
names, tracked or new but not ignored) to a scratch directory, checks that the named tests pass there
unchanged, applies the edit, runs the same tests again and reports:

* ``caught``: at least one test failed with the edit in place;
* ``SURVIVED``: every test still passed, so nothing guards that behaviour;
* ``MISSING``: the edit's old text is no longer in the file (the code moved: update the mutation).

The exit status is 0 only when every mutation is caught. Run it from the repository root with the
project's virtual environment::

    .venv/bin/python scripts/mutants.py            # all mutations
    .venv/bin/python scripts/mutants.py M2 M4      # some of them, by name

To add a mutation, append a :class:`Mutation` to :data:`MUTATIONS`: the file, the exact text to replace
(unique in that file), its replacement and the test files (or node ids) that must catch it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    compliance: bool = False
    """Run the tests' slow compliance checks too (cdk-nag, the strict validator, checkov)."""


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "M1",
        "TrainingClusterStack does not check its config",
        "src/hyperpod_cdk/stacks/training_cluster.py",
        "config.check(\n"
        '            f"cluster configuration of stack {scope.node.id}", region=stack_region(Stack.of(scope))\n'
        "        )",
        "[]",
        ("tests/test_stack.py",),
    ),
    Mutation(
        "M2",
        "a re-run keeps the stale done marker",
        "src/training_runtime/plan.py",
        "        if changed == 0:\n            node.path(DONE_MARKER).unlink(missing_ok=True)\n",
        "",
        ("tests/test_runtime_steps.py",),
    ),
    Mutation(
        "M3",
        "the S3 gateway endpoint becomes a DynamoDB one",
        "src/hyperpod_cdk/constructs/network.py",
        "ec2.GatewayVpcEndpointAwsService.S3",
        "ec2.GatewayVpcEndpointAwsService.DYNAMODB",
        ("tests/test_network.py",),
    ),
    Mutation(
        "M4",
        "HyperPodCluster writes the parameters file without the runtime options",
        "src/hyperpod_cdk/constructs/cluster.py",
        "            runtime_options=runtime_options,\n",
        "            runtime_options={},\n",
        ("tests/test_cluster.py", "tests/test_examples.py", "tests/test_local_layout.py"),
    ),
    Mutation(
        "M4b",
        "the parameters builder drops the runtime options",
        "src/hyperpod_cdk/parameters.py",
        "options=dict(runtime_options or {}),",
        "options={},",
        ("tests/test_cluster.py", "tests/test_examples.py"),
    ),
    Mutation(
        "M5",
        "storage: null is refused only in lifecycle-driven mode",
        "src/hyperpod_cdk/rules/cluster.py",
        '    if view.users:\n        needs.append("users (their homes)")\n    if view.runtime.get("pytorch"):\n'
        '        needs.append("runtime.pytorch (the shared environment)")\n',
        "",
        ("tests/test_config.py",),
    ),
    Mutation(
        "M6",
        "the Slurm step ignores a group's threads_per_core",
        "src/training_runtime/steps/slurm.py",
        "hardware_for(instance_type, node.options.node_hardware, group.threads_per_core)",
        "hardware_for(instance_type, node.options.node_hardware)",
        ("tests/test_runtime_steps.py",),
    ),
    Mutation(
        "M7",
        "InstanceGroup.spec() loses threads_per_core",
        "src/hyperpod_cdk/model.py",
        "threads_per_core=self.threads_per_core",
        "threads_per_core=1",
        ("tests/test_cluster.py",),
    ),
    Mutation(
        "M8",
        "the local cluster keeps the stack's Lustre names",
        "hyperpod-local/src/hyperpod_local/layout.py",
        "deployed, fsx_dns_name=None, fsx_mountname=None, fsx=None, metrics=None, options=options",
        "deployed, metrics=None, options=options",
        ("tests/test_local_layout.py", "tests/test_local_staging.py"),
    ),
    Mutation(
        "M9",
        "the parameters file loses a group's partition",
        "src/training_runtime/params.py",
        '"partition": g.partition,\n',
        '"partition": None,\n',
        ("tests/test_examples.py", "tests/test_params.py"),
    ),
    Mutation(
        "V1",
        "validate loads CDK (and so needs Node.js)",
        "src/hyperpod_cdk/validate.py",
        "import json\n",
        "import json\n\nimport aws_cdk  # noqa: F401\n",
        ("tests/test_validate_offline.py",),
    ),
    Mutation(
        "V2",
        "Slurm's 16-bit timeout limit is forgotten",
        "src/training_runtime/options.py",
        "MAX_SLURM_SECONDS = 65535",
        "MAX_SLURM_SECONDS = 655350",
        ("tests/test_rules.py",),
    ),
    Mutation(
        "V3",
        "constructs judge CDK tokens as values",
        "src/hyperpod_cdk/constructs/checks.py",
        "is_unresolved=Token.is_unresolved",
        "is_unresolved=lambda value: False",
        ("tests/test_rules.py",),
    ),
    Mutation(
        "V4",
        "the instance-type rule forgets the Region",
        "src/hyperpod_cdk/rules/groups.py",
        "offered = instance_catalog.types_in(view.region) if view.region else None",
        "offered = None",
        ("tests/test_rules.py",),
    ),
    Mutation(
        "V5",
        "the PyTorch line on Trainium is left to the node again",
        "src/hyperpod_cdk/rules/runtime.py",
        "    if trainium and series != pins.NEURON_TORCH_SERIES:",
        "    if False:",
        ("tests/test_rules.py",),
    ),
    Mutation(
        "O1",
        "reboot/replace send more than 25 node ids per call",
        "src/hyperpod_cdk/ops/nodes.py",
        "BATCH_LIMIT = 25\n",
        "BATCH_LIMIT = 50\n",
        ("tests/test_ops_nodes.py",),
    ),
    Mutation(
        "O2",
        "a partial batch failure exits 0",
        "src/hyperpod_cdk/ops/nodes.py",
        "    outcome = Exit.FAILED if failed else Exit.OK",
        "    outcome = Exit.OK",
        ("tests/test_ops_nodes.py",),
    ),
    Mutation(
        "O3",
        "ssh-config appends a second block instead of replacing its own",
        "src/hyperpod_cdk/ops/access.py",
        "    start = existing.find(begin)",
        "    start = -1",
        ("tests/test_ops_access.py",),
    ),
    Mutation(
        "O4",
        "wait treats a Failed cluster as still in progress",
        "src/hyperpod_cdk/ops/status.py",
        'SETTLED_BAD = {"Failed"}',
        "SETTLED_BAD: set[str] = set()",
        ("tests/test_ops_status.py",),
    ),
    Mutation(
        "O5",
        "scale updates a cluster the stack owns",
        "src/hyperpod_cdk/ops/scale.py",
        "    if managed and not args.allow_drift:",
        "    if False:",
        ("tests/test_ops_scale_events_job.py",),
    ),
    Mutation(
        "V6",
        "problems printed at synth lose their rule id",
        "src/hyperpod_cdk/errors.py",
        '    return f" [{rule}]" if rule else ""',
        '    return ""',
        ("tests/test_rules.py",),
    ),
    Mutation(
        "V7",
        "a template-validator finding is not named by its config field",
        "src/hyperpod_cdk/template_findings.py",
        '"instance_groups[{0}].count"),',
        '"instance_groups"),',
        ("tests/test_template_findings.py",),
    ),
    Mutation(
        "V8",
        "the runtime section's shape goes unchecked",
        "src/hyperpod_cdk/rules/runtime.py",
        "        if p.rule == runtime_options.SHAPE_RULE",
        "        if False",
        ("tests/test_rules.py",),
    ),
    Mutation(
        "G1",
        "the permission boundary skips CDK-internal roles written as plain CfnResource",
        "src/hyperpod_cdk/organization/identity.py",
        "if CfnResource.is_cfn_resource(node) and node.cfn_resource_type in BOUNDED_TYPES:",
        "if isinstance(node, CfnResource) and type(node) is not CfnResource and node.cfn_resource_type in "
        "BOUNDED_TYPES:",
        ("tests/test_organization.py",),
    ),
    Mutation(
        "G2",
        "the bucket injector leaves the organization's key out (CDK makes a key of its own)",
        "src/hyperpod_cdk/organization/encryption.py",
        '            "encryptionKey": self._key_of(scope),\n',
        "",
        ("tests/test_organization.py",),
    ),
    Mutation(
        "G3",
        "a SCRATCH file system silently keeps FSx's own key",
        "src/hyperpod_cdk/organization/encryption.py",
        "        if deployment in SCRATCH_TYPES:",
        "        if False:",
        ("tests/test_organization.py",),
    ),
    Mutation(
        "G4",
        "a group without storage configs keeps AWS's key on its root volume",
        "src/hyperpod_cdk/organization/encryption.py",
        "                cluster.add_property_override(at, [root])",
        "                pass",
        ("tests/test_organization.py",),
    ),
    Mutation(
        "G5",
        "the organization's key goes on node volumes of a cluster HyperPod cannot encrypt with it",
        "src/hyperpod_cdk/organization/encryption.py",
        "if Stack.of(cluster).resolve(cluster.node_provisioning_mode) != CONTINUOUS:",
        "if False:",
        ("tests/test_organization.py",),
    ),
    Mutation(
        "G6",
        "the execution role may not create the volumes' grants on the organization's key",
        "src/hyperpod_cdk/organization/encryption.py",
        "        self._grant_execution_roles(cluster, groups if isinstance(groups, list) else [])\n",
        "",
        ("tests/test_organization.py",),
    ),
    Mutation(
        "P1",
        "the cluster-name pattern is not applied to the template parameter",
        "src/hyperpod_cdk/template_parameters.py",
        "                allowed_pattern=NAME_PATTERN.pattern,\n",
        "",
        ("tests/test_template_parameters.py",),
    ),
    Mutation(
        "P2",
        "an allowed FSx capacity is not run through the rules",
        "src/hyperpod_cdk/rules/parameters.py",
        '                substitute(f"{ROOT}.storage_capacity_gib[{position}]", capacity, storage=changed_storage)',
        "                pass",
        ("tests/test_rules.py",),
    ),
    Mutation(
        "P3",
        "the count parameter does not reach the cluster",
        "src/hyperpod_cdk/stacks/choices.py",
        '                changes["count"] = count.value_as_number',
        "                pass",
        ("tests/test_template_parameters.py",),
    ),
    Mutation(
        "P4",
        "the node ignores the resource config's instance type",
        "src/training_runtime/resources.py",
        "                types[group_name] = instance_type",
        "                pass",
        ("tests/test_params.py",),
    ),
    Mutation(
        "P5",
        "the worst case (every group at its largest choice) is not checked",
        "src/hyperpod_cdk/rules/parameters.py",
        "    if largest:\n",
        "    if False:\n",
        ("tests/test_rules_parameters.py",),
    ),
    Mutation(
        "B1",
        "a re-publish uploads every object again",
        "src/hyperpod_cdk/publishing/upload.py",
        "        if not exists:\n            s3.put_object(",
        "        if True:\n            s3.put_object(",
        ("tests/test_publish_command.py",),
    ),
    Mutation(
        "B2",
        "the lifecycle prefix's hash ignores the parameters file",
        "src/hyperpod_cdk/constructs/published_lifecycle.py",
        "            self._tree = tree_hash(files)",
        "            self._tree = tree_hash({n: b for n, b in files.items() if not n.endswith('parameters.json')})",
        ("tests/test_publish_template.py", "tests/test_publish_command.py"),
    ),
    Mutation(
        "B3",
        "a published template keeps the default-security-group Lambda",
        "src/hyperpod_cdk/stacks/training_cluster.py",
        "                restrict_default_security_group=self.published is None,",
        "                restrict_default_security_group=True,",
        ("tests/test_publish_template.py",),
    ),
    Mutation(
        "B4",
        "the node ignores the explicit FSx flag",
        "src/training_runtime/node.py",
        "        return self.platform == GENERIC or self.params.has_fsx",
        "        return self.platform == GENERIC or bool(self.params.fsx_dns_name)",
        ("tests/test_runtime_steps.py",),
    ),
    Mutation(
        "A27",
        "an OpenZFS DNS name over the schema's 275 characters is accepted",
        "src/hyperpod_cdk/rules/openzfs.py",
        'too_long = field == "dns_name" and len(value) > MAX_DNS_NAME',
        "too_long = False",
        ("tests/test_rules_api.py",),
    ),
    Mutation(
        "Z1",
        "a new OpenZFS root volume is exported to every address",
        "src/hyperpod_cdk/constructs/openzfs.py",
        "ClientConfigurationsProperty(clients=cidr,",
        'ClientConfigurationsProperty(clients="*",',
        ("tests/test_openzfs.py",),
    ),
    Mutation(
        "Z2",
        "a new OpenZFS file system is deleted with the stack by default",
        "src/hyperpod_cdk/constructs/openzfs.py",
        "file_system.apply_removal_policy(removal_policy)",
        "file_system.apply_removal_policy(RemovalPolicy.DESTROY)",
        ("tests/test_openzfs.py",),
    ),
    Mutation(
        "Z3",
        "the OpenZFS security group allows all outbound traffic",
        "src/hyperpod_cdk/constructs/openzfs.py",
        "allow_all_outbound=False,",
        "allow_all_outbound=True,",
        ("tests/test_openzfs.py",),
    ),
    Mutation(
        "Z4",
        "the nodes never learn where OpenZFS is mounted (homes stay on Lustre)",
        "src/hyperpod_cdk/constructs/cluster.py",
        "openzfs_mount_path=openzfs.mount_path if openzfs is not None else None,",
        "openzfs_mount_path=None,",
        ("tests/test_openzfs.py",),
    ),
    Mutation(
        "Z5",
        "the runtime keeps homes on Lustre when OpenZFS is mounted",
        "src/training_runtime/params.py",
        "        if self.openzfs_mount_path is not None:\n            return self.openzfs_mount_path",
        "        if False:\n            return self.openzfs_mount_path",
        ("tests/test_runtime_steps.py", "tests/test_params.py"),
    ),
    Mutation(
        "Z6",
        "homes are made on the node's disk when HyperPod's OpenZFS mount is missing",
        "src/training_runtime/steps/users.py",
        "        self._wait_for_homes_mount(node)\n",
        "",
        ("tests/test_runtime_steps.py",),
    ),
    Mutation(
        "Z7",
        "an OpenZFS throughput outside the deployment type's tiers is accepted",
        "src/hyperpod_cdk/rules/openzfs.py",
        "if view.concrete(value) and value not in allowed:",
        "if False:",
        ("tests/test_rules.py", "tests/test_openzfs.py"),
    ),
    Mutation(
        "Z8",
        "OpenZFS exported to 0.0.0.0/0 is accepted",
        "src/hyperpod_cdk/rules/openzfs.py",
        "if network.prefixlen == 0:",
        "if False:",
        ("tests/test_rules.py", "tests/test_openzfs.py"),
    ),
    Mutation(
        "B5",
        "publish hands a bucket name S3 refuses to botocore (a traceback)",
        "src/hyperpod_cdk/publishing/command.py",
        "    bucket_problem = bucket_name_problem(target.bucket_name)",
        '    bucket_problem = ""',
        ("tests/test_publish_command.py",),
    ),
    Mutation(
        "J1",
        "the package leaves jsii's Node end-of-life banner on",
        "src/hyperpod_cdk/__init__.py",
        'os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")',
        "pass",
        ("tests/test_publish_command.py::test_the_command_prints_no_node_end_of_life_banner",),
    ),
    Mutation(
        "S1",
        "a bucket without access logs carries no reason for checkov",
        "src/hyperpod_cdk/constructs/buckets.py",
        'explain(bucket, ACCESS_LOGS_REASON, checkov=[MISSING_ACCESS_LOGS], nag=["AwsSolutions-S1"])',
        'explain(bucket, ACCESS_LOGS_REASON, nag=["AwsSolutions-S1"])',
        ("tests/test_scanners.py::test_checkov_finds_nothing_unexplained",),
        compliance=True,
    ),
    Mutation(
        "A1",
        "capacity spot renders OnDemand",
        "src/hyperpod_cdk/constructs/group_api.py",
        'CAPACITY_OPTIONS = {Capacity.SPOT: "Spot", Capacity.ON_DEMAND: "OnDemand"}',
        'CAPACITY_OPTIONS = {Capacity.SPOT: "OnDemand", Capacity.ON_DEMAND: "OnDemand"}',
        ("tests/test_cluster_api.py",),
    ),
    Mutation(
        "A2",
        "a group without capacity gets On-Demand written",
        "src/hyperpod_cdk/constructs/group_api.py",
        '"capacity_requirements": capacity_requirements(group.capacity) if group.capacity else None,',
        '"capacity_requirements": capacity_requirements(group.capacity or Capacity.ON_DEMAND),',
        ("tests/test_cluster_api.py",),
    ),
    Mutation(
        "A3",
        "min_count above count accepted",
        "src/hyperpod_cdk/rules/capacity.py",
        "elif view.concrete(group.count) and value > group.count:",
        "elif view.concrete(group.count) and value > group.count + 1:",
        ("tests/test_rules_api.py",),
    ),
    Mutation(
        "A4",
        "Spot accepted on the controller group",
        "src/hyperpod_cdk/rules/capacity.py",
        "if group.capacity == Capacity.SPOT and group.role != NodeRole.COMPUTE:",
        "if group.capacity == Capacity.SPOT and group.role == NodeRole.LOGIN:",
        ("tests/test_cluster_api.py",),
    ),
    Mutation(
        "A5",
        "TrainingCluster drops node_provisioning_mode",
        "src/hyperpod_cdk/stacks/training_cluster.py",
        "            node_provisioning_mode=config.node_provisioning_mode,\n",
        "",
        ("tests/test_examples.py",),
    ),
    Mutation(
        "A6",
        "the schedule expression only has to contain the pattern",
        "src/hyperpod_cdk/rules/images.py",
        "not SCHEDULE_EXPRESSION_PATTERN.fullmatch(value)",
        "not SCHEDULE_EXPRESSION_PATTERN.search(value)",
        ("tests/test_rules_api.py",),
    ),
    Mutation(
        "A7",
        "a group's own subnets are not granted to the nodes' interface creation",
        "src/hyperpod_cdk/constructs/cluster.py",
        "subnets = dict.fromkeys([network.subnet_id, *(s for o in overrides for s in o.subnet_ids)])",
        "subnets = dict.fromkeys([network.subnet_id])",
        ("tests/test_cluster_api.py",),
    ),
    Mutation(
        "A8",
        "network_interface accepted on a type without EFA",
        "src/hyperpod_cdk/rules/group_network.py",
        "(h := view.hardware(t)) is not None and not h.efa_interfaces",
        "(h := view.hardware(t)) is None",
        ("tests/test_rules.py", "tests/test_cluster_api.py"),
    ),
    Mutation(
        "A9",
        "override_vpc accepted with a new VPC",
        "src/hyperpod_cdk/rules/group_network.py",
        "if view.network is None or view.network.vpc_id:",
        "if view.network is None or not view.network.vpc_id:",
        ("tests/test_rules.py",),
    ),
    Mutation(
        "A10",
        "a capacity chosen at launch renders the other option",
        "src/hyperpod_cdk/stacks/choices.py",
        "is_spot.logical_id, capacity_document(Capacity.SPOT), capacity_document(Capacity.ON_DEMAND)",
        "is_spot.logical_id, capacity_document(Capacity.ON_DEMAND), capacity_document(Capacity.SPOT)",
        ("tests/test_template_parameters.py",),
    ),
    Mutation(
        "A11",
        "the allowed capacities are not run through the rules",
        "src/hyperpod_cdk/rules/parameters.py",
        "if group.capacity is not None and allowed != group.capacity:",
        "if False:",
        ("tests/test_template_parameters.py",),
    ),
    Mutation(
        "A12",
        "a group's own security groups are not admitted to the file system",
        "src/hyperpod_cdk/constructs/cluster.py",
        "                file_system.allow_clients(imported)",
        "                pass",
        ("tests/test_cluster_api.py",),
    ),
    Mutation(
        "A13",
        "automatic patching renders the other strategy",
        "src/hyperpod_cdk/constructs/group_api.py",
        'PatchingStrategy.WHEN_ALL_IDLE: "WhenAllIdle"}',
        'PatchingStrategy.WHEN_ALL_IDLE: "WhenIdle"}',
        ("tests/test_cluster_api.py",),
    ),
    Mutation(
        "A14",
        "automatic patching's deployment escapes the deployment rules",
        "src/hyperpod_cdk/rules/images.py",
        'for field, setting in (("scheduled_update", group.scheduled_update), ("auto_patch", group.auto_patch)):',
        'for field, setting in (("scheduled_update", group.scheduled_update),):',
        ("tests/test_rules_api.py",),
    ),
    Mutation(
        "A15",
        "the group's key is not put on its extra volume",
        "src/hyperpod_cdk/constructs/group_api.py",
        "volume_size_in_gb=group.ebs_volume_gib, volume_kms_key_id=key",
        "volume_size_in_gb=group.ebs_volume_gib",
        ("tests/test_cluster_api.py",),
    ),
    Mutation(
        "A16",
        "the execution role gets no grant on the volume key",
        "src/hyperpod_cdk/constructs/cluster.py",
        "        self._grant_volume_keys()\n",
        "",
        ("tests/test_cluster_api.py",),
    ),
    Mutation(
        "A17",
        "the organization's key silently overwrites a group's own volume key",
        "src/hyperpod_cdk/organization/encryption.py",
        "                if own is None:",
        "                if True:",
        ("tests/test_organization.py::test_a_group_key_other_than_the_organizations_is_an_error_not_overwritten",),
    ),
    Mutation(
        "A18",
        "a volume key accepted without continuous provisioning",
        "src/hyperpod_cdk/rules/volumes.py",
        "        if group.volume_kms_key_arn is not None:\n            yield Problem(",
        "        if False:\n            yield Problem(",
        ("tests/test_rules_api.py", "tests/test_cluster_api.py"),
    ),
    Mutation(
        "A19",
        "the external database from runtime.accounting is not given to HyperPod (AccountingDatabase)",
        "src/hyperpod_cdk/constructs/cluster.py",
        "if parameters.slurmdbd_by_hyperpod  # the node's parameters say the same: one decision",
        "if False",
        ("tests/test_cluster_api.py", "tests/test_accounting_database.py"),
    ),
    Mutation(
        "A20",
        "the runtime writes a second slurmdbd configuration where HyperPod runs slurmdbd",
        "src/training_runtime/steps/catalog.py",
        "by_hyperpod = node.params.slurmdbd_by_hyperpod and not generic",
        "by_hyperpod = False",
        ("tests/test_runtime_hyperpod_accounting.py", "tests/test_accounting_database.py"),
    ),
    Mutation(
        "A21",
        "OpenZFS accepted in lifecycle-driven mode",
        "src/hyperpod_cdk/rules/openzfs.py",
        "if view.openzfs is not None and view.mode == LIFECYCLE_DRIVEN:",
        "if False:",
        ("tests/test_rules.py", "tests/test_cluster_api.py"),
    ),
    Mutation(
        "A22",
        "HyperPod is not told to mount OpenZFS",
        "src/hyperpod_cdk/constructs/cluster.py",
        "            if openzfs is not None:\n                storage_configs.append(",
        "            if False:\n                storage_configs.append(",
        ("tests/test_cluster_api.py",),
    ),
    Mutation(
        "A23",
        "the nodes reach OpenZFS on the NFS TCP ports only",
        "src/hyperpod_cdk/constructs/openzfs.py",
        "for port in (tcp, udp)",
        "for port in (tcp,)",
        ("tests/test_cluster_api.py",),
    ),
    Mutation(
        "A24",
        "a group's own security groups are not admitted to OpenZFS",
        "src/hyperpod_cdk/constructs/cluster.py",
        "self._admit_group_security_groups([s for s in (storage, openzfs) if s is not None])",
        "self._admit_group_security_groups([s for s in (storage,) if s is not None])",
        ("tests/test_cluster_api.py",),
    ),
    Mutation(
        "A25",
        "TrainingCluster drops storage_openzfs",
        "src/hyperpod_cdk/stacks/training_cluster.py",
        "            openzfs=self.openzfs,\n",
        "",
        ("tests/test_cluster_api.py",),
    ),
    Mutation(
        "A26",
        "OpenZFS accepted at the Lustre mount path",
        "src/hyperpod_cdk/rules/openzfs.py",
        "view.openzfs.mount_path == view.fsx_mount_path",
        "view.openzfs.mount_path == view.fsx_mount_path + '/'",
        ("tests/test_rules_api.py",),
    ),
    Mutation(
        "D1",
        "dashboard queries keep Grafana's $__rate_interval and $__range",
        "src/hyperpod_cdk/observability/dashboards.py",
        "value = builtins.get(name, variables.get(name))",
        "value = variables.get(name)",
        ("tests/test_dashboards.py",),
    ),
    Mutation(
        "D2",
        "a dashboard variable's 'All' value is ignored",
        "src/hyperpod_cdk/observability/dashboards.py",
        'if variable.get("includeAll") and "allValue" in variable',
        'if False and "allValue" in variable',
        ("tests/test_plot_dashboards.py",),
    ),
    Mutation(
        "D3",
        "plot_dashboards.py ignores the variables given with --var",
        "scripts/plot_dashboards.py",
        "        if variable.name in given:",
        "        if False:",
        ("tests/test_plot_dashboards.py",),
    ),
    Mutation(
        "D4",
        "plot_dashboards.py asks Prometheus for another resolution than the window's",
        "scripts/plot_dashboards.py",
        '("step", str(window.step))',
        '("step", "15")',
        ("tests/test_plot_dashboards.py",),
    ),
    Mutation(
        "D5",
        "plot_dashboards.py ignores the panels' legend formats",
        "scripts/plot_dashboards.py",
        'if named and template != "__auto":',
        "if False:",
        ("tests/test_plot_dashboards.py",),
    ),
    Mutation(
        "L1",
        "the emulator stops its daemons without reaping them (zombies in a long-lived caller)",
        "hyperpod-local/src/hyperpod_local/daemons.py",
        "if os.waitpid(pid, os.WNOHANG)[0] == pid:\n                return\n        except ChildProcessError:  # st",
        "if False:\n                return\n        except ChildProcessError:  # st",
        ("tests/test_local_daemons.py",),
    ),
)


def repository_files(root: Path) -> list[str]:
    """Tracked files and new files that git does not ignore."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout
    return [name for name in out.decode().split("\0") if name and (root / name).is_file()]


def copy_repository(root: Path, target: Path) -> None:
    for name in repository_files(root):
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, destination)
    if (root / ".venv-scan").is_dir():  # checkov's own venv (make setup), for the scanner tests
        (target / ".venv-scan").symlink_to(root / ".venv-scan")


def tests_pass(copy: Path, tests: tuple[str, ...], compliance: bool = False) -> tuple[bool, str]:
    """Run ``tests`` in ``copy`` with its own sources first on the path; (passed, last lines)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy / "src"), str(copy / "hyperpod-local" / "src"), str(copy / "tests")])
    env.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
        + ([] if compliance else ["-m", "not compliance"])
        + list(tests),
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    return result.returncode == 0, lines[-1] if lines else result.stderr.strip()[-300:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("names", nargs="*", help="mutations to run (default: all)")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.names or m.name in args.names]
    unknown = set(args.names) - {m.name for m in MUTATIONS}
    if unknown:
        parser.error(f"unknown mutations {sorted(unknown)}; known: {', '.join(m.name for m in MUTATIONS)}")
    failures = 0
    baseline: dict[tuple[str, ...], tuple[bool, str]] = {}
    with tempfile.TemporaryDirectory(prefix="mutants-") as scratch:
        copy = Path(scratch)
        copy_repository(ROOT, copy)
        for mutation in chosen:
            path = copy / mutation.file
            original = path.read_text() if path.exists() else ""
            count = original.count(mutation.old)
            if count != 1:
                failures += 1
                where = "not found" if count == 0 else f"found {count} times"
                print(f"{mutation.name:4} MISSING   {mutation.what}: the old text is {where} in {mutation.file}")
                continue
            key = (*mutation.tests, str(mutation.compliance))
            if key not in baseline:
                baseline[key] = tests_pass(copy, mutation.tests, mutation.compliance)
            passed, summary = baseline[key]
            if not passed:
                failures += 1
                print(f"{mutation.name:4} BROKEN    {mutation.what}: the tests fail without the mutation ({summary})")
                continue
            path.write_text(original.replace(mutation.old, mutation.new))
            try:
                passed, summary = tests_pass(copy, mutation.tests, mutation.compliance)
            finally:
                path.write_text(original)
            if passed:
                failures += 1
                print(f"{mutation.name:4} SURVIVED  {mutation.what}: {' '.join(mutation.tests)} ({summary})")
            else:
                print(f"{mutation.name:4} caught    {mutation.what}: {summary}")
    print(f"{len(chosen) - failures} of {len(chosen)} mutations caught")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
