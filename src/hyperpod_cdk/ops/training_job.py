"""``training-job-config``: a TrainingClusterStack's outputs as a SageMaker training job's network and FSx input.

A training job in the cluster's subnet and security group can mount the cluster's FSx for Lustre file system
as an input channel (``FileSystemDataSource``), so jobs and the cluster share data and checkpoints.
"""

from __future__ import annotations

import argparse
import posixpath
from typing import Any

from hyperpod_cdk.aws.clients import Aws, error_code, error_message
from hyperpod_cdk.aws.errors import Exit, OpsError
from hyperpod_cdk.core.stack_outputs import (
    CLUSTER_NAME,
    FSX_FILE_SYSTEM_ID,
    FSX_MOUNT_NAME,
    TRAINING_JOB_SECURITY_GROUPS,
    TRAINING_JOB_SUBNETS,
)
from hyperpod_cdk.ops.context import OpsContext
from hyperpod_cdk.ops.render import to_json

REQUIRED = (TRAINING_JOB_SUBNETS, TRAINING_JOB_SECURITY_GROUPS)


def stack_outputs(cloudformation: Any, stack: str) -> dict[str, str]:
    from botocore.exceptions import ClientError

    try:
        pages = list(cloudformation.get_paginator("describe_stacks").paginate(StackName=stack))
    except ClientError as error:
        if error_code(error) == "ValidationError" and "does not exist" in error_message(error):
            raise OpsError(
                f"no CloudFormation stack {stack!r} in {cloudformation.meta.region_name}: give the stack name "
                "`cdk deploy` printed (and --region)",
                Exit.NOT_FOUND,
            ) from None
        raise
    outputs: dict[str, str] = {}
    for page in pages:
        for found in page.get("Stacks", []):
            for output in found.get("Outputs", []):
                outputs[str(output["OutputKey"])] = str(output.get("OutputValue", ""))
    return outputs


def _ids(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def job_config(outputs: dict[str, str], stack: str, directory: str, channel: str, mode: str) -> dict[str, Any]:
    missing = [key for key in REQUIRED if key not in outputs]
    if missing:
        raise OpsError(
            f"stack {stack} has no output {', '.join(missing)}: is it a hyperpod-cdk TrainingClusterStack?",
            Exit.NOT_FOUND,
        )
    vpc = {
        "Subnets": _ids(outputs[TRAINING_JOB_SUBNETS]),
        "SecurityGroupIds": _ids(outputs[TRAINING_JOB_SECURITY_GROUPS]),
    }
    config: dict[str, Any] = {
        "stack": stack,
        "cluster_name": outputs.get(CLUSTER_NAME),
        "CreateTrainingJob": {"VpcConfig": vpc},
        "estimator": {"subnets": vpc["Subnets"], "security_group_ids": vpc["SecurityGroupIds"]},
    }
    if FSX_FILE_SYSTEM_ID in outputs and FSX_MOUNT_NAME in outputs:
        # FSx for Lustre channels name the path under the mount name: /<MountName>/<directory>.
        path = posixpath.normpath(posixpath.join("/", outputs[FSX_MOUNT_NAME], directory.lstrip("/")))
        source = {
            "FileSystemId": outputs[FSX_FILE_SYSTEM_ID],
            "FileSystemType": "FSxLustre",
            "DirectoryPath": path,
            "FileSystemAccessMode": mode,
        }
        config["CreateTrainingJob"]["InputDataConfig"] = [
            {"ChannelName": channel, "InputMode": "File", "DataSource": {"FileSystemDataSource": source}}
        ]
        config["estimator"]["inputs"] = {
            channel: {
                "file_system_id": source["FileSystemId"],
                "file_system_type": "FSxLustre",
                "directory_path": path,
                "file_system_access_mode": mode,
            }
        }
    return config


def python_snippet(config: dict[str, Any]) -> str:
    """SageMaker Python SDK (v2) code: the estimator's network arguments and a FileSystemInput channel."""
    estimator = config["estimator"]
    lines = [
        f"# Stack {config['stack']} (cluster {config['cluster_name']}): written by hyperpod-cdk training-job-config",
        f"subnets = {estimator['subnets']!r}",
        f"security_group_ids = {estimator['security_group_ids']!r}",
    ]
    inputs = estimator.get("inputs", {})
    if inputs:
        lines.insert(1, "from sagemaker.inputs import FileSystemInput")
        lines.append("inputs = {")
        for channel, arguments in inputs.items():
            lines.append(f"    {channel!r}: FileSystemInput(")
            lines += [f"        {key}={value!r}," for key, value in arguments.items()]
            lines.append("    ),")
        lines.append("}")
    else:
        lines.append("inputs = {}  # the stack has no FSx for Lustre file system")
    lines += [
        "# estimator = PyTorch(..., subnets=subnets, security_group_ids=security_group_ids)",
        "# estimator.fit(inputs)",
    ]
    return "\n".join(lines) + "\n"


def training_job_config(args: argparse.Namespace, ctx: OpsContext) -> int:
    aws = Aws(ctx.session(args.profile, args.region))
    outputs = stack_outputs(aws.client("cloudformation"), args.stack)
    config = job_config(outputs, args.stack, args.directory, args.channel, args.access_mode)
    snippet = python_snippet(config)
    if args.json:
        ctx.write(to_json({**config, "python": snippet}))
    elif args.python:
        ctx.write(snippet)
    else:
        ctx.write("# CreateTrainingJob fields (JSON)\n" + to_json(config["CreateTrainingJob"]))
        ctx.write("\n# SageMaker Python SDK\n" + snippet)
    return Exit.OK
