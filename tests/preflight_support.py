"""A real-looking account in moto for the preflight tests, and named fakes for the calls moto lacks.

moto (the server on 127.0.0.1 from ops_support) serves EC2 (VPCs, subnets, security groups, network interfaces,
AMIs), S3, KMS, Secrets Manager, IAM, Amazon Managed Service for Prometheus, FSx and SageMaker's
ListClusters/DescribeCluster over real botocore. ``AccountFakes`` answers, through botocore's before-call event
(after botocore has validated the parameters, as ``ops_support.HyperPodFakes`` does):

- Service Quotas ListServiceQuotas: moto implements only the ``vpc`` service's default quotas
  (ListAWSDefaultServiceQuotas/GetServiceQuota), not SageMaker's applied quotas. The fake answers ``quotas``.
- SageMaker DescribeTrainingPlan: not in moto. The fake answers ``plans`` (ResourceNotFound for others).
- Any call can be made to fail with ``fail[(service, operation)] = (code, message)`` (access denied, an API
  missing in the Region): IAM permissions are not enforced by moto.

moto's FSx does not create network interfaces or report Lifecycle / MountName, so ``MotoAccount.file_system``
creates the interfaces in moto's EC2 and adds the fields the service returns to moto's record (``extra``); moto's
AMIs do not report ``Encrypted`` on their block devices, so ``moto_extras`` adds it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto.ec2.models.amis import Ami as MotoAmi
from moto.fsx.models import FileSystem as MotoFileSystem

from hyperpod_cdk.aws.session import make_session
from hyperpod_cdk.core.config import parse_model
from hyperpod_cdk.preflight.account import Account
from hyperpod_cdk.preflight.runner import run_online
from hyperpod_cdk.rules import ClusterView, all_rules
from ops_support import ACCOUNT, REGION, _error, _ok
from training_runtime.problems import Problem

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)  # preflight's injected clock (Account(now=...)); the plans are fakes
P5 = "ml.p5.48xlarge"
AZ = f"{REGION}a"
OTHER_AZ = f"{REGION}b"


@dataclass
class AccountFakes:
    quotas: dict[str, float] = field(default_factory=dict)
    plans: dict[str, dict[str, Any]] = field(default_factory=dict)
    fail: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def install(self, session: boto3.session.Session) -> None:
        session.events.register("before-call.service-quotas.ListServiceQuotas", self._quotas)
        session.events.register("before-call.sagemaker.DescribeTrainingPlan", self._plan)
        for service, operation in self.fail:
            session.events.register(f"before-call.{service}.{operation}", self._failing)

    def _failing(self, model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        key = (model.service_model.endpoint_prefix, model.name)
        key = key if key in self.fail else (model.service_model.service_name, model.name)
        if key in self.fail:
            return _error(*self.fail[key])
        return None

    def _quotas(self, model: Any, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        if (key := ("service-quotas", "ListServiceQuotas")) in self.fail:
            return _error(*self.fail[key])
        body = json.loads(params["body"] or b"{}")
        self.calls.append(("ListServiceQuotas", body["ServiceCode"]))
        # Two pages, as the service pages its answers.
        items = [
            {"QuotaName": name, "Value": value, "QuotaCode": f"L-{i:08X}", "ServiceCode": "sagemaker"}
            for i, (name, value) in enumerate(sorted(self.quotas.items()))
        ]
        start = int(body.get("NextToken") or 0)
        page: dict[str, Any] = {"Quotas": items[start : start + 2]}
        if start + 2 < len(items):
            page["NextToken"] = str(start + 2)
        return _ok(page)

    def _plan(self, model: Any, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        if (key := ("sagemaker", "DescribeTrainingPlan")) in self.fail:
            return _error(*self.fail[key])
        name = json.loads(params["body"])["TrainingPlanName"]
        if name not in self.plans:
            return _error("ResourceNotFound", f"Training plan {name} does not exist")
        return _ok(self.plans[name])


def plan(
    name: str, instance_type: str = "ml.p5.48xlarge", count: int = 4, az: str = AZ, **changes: Any
) -> dict[str, Any]:
    """A DescribeTrainingPlan answer: Active, for HyperPod, started a day ago, ending in a week."""
    start, end = NOW - timedelta(days=1), NOW + timedelta(days=7)
    answer = {
        "TrainingPlanArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/{name}",
        "TrainingPlanName": name,
        "Status": "Active",
        "StartTime": start,
        "EndTime": end,
        "TotalInstanceCount": count,
        "AvailableInstanceCount": count,
        "InUseInstanceCount": 0,
        "TargetResources": ["hyperpod-cluster"],
        "ReservedCapacitySummaries": [
            {
                "ReservedCapacityArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:reserved-capacity/{name}-1",
                "InstanceType": instance_type,
                "TotalInstanceCount": count,
                "Status": "Active",
                "AvailabilityZone": az,
                "StartTime": start,
                "EndTime": end,
            }
        ],
    }
    answer.update(changes)
    return answer


@pytest.fixture(autouse=True)
def moto_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    enrich_moto(monkeypatch)


def enrich_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's FSx record plus the fields the service returns (``extra``: Lifecycle, NetworkInterfaceIds, ...), and
    its AMIs' block devices with ``Encrypted`` (moto leaves it out; an AMI built from an encrypted volume has it)."""
    to_dict = MotoFileSystem.to_dict
    monkeypatch.setattr(MotoFileSystem, "to_dict", lambda self: {**to_dict(self), **getattr(self, "extra", {})})
    devices = MotoAmi.block_device_mappings.fget
    assert devices is not None

    def with_encryption(self: Any) -> list[dict[str, Any]]:
        found = devices(self)
        for device in found:
            device["Ebs"]["Encrypted"] = getattr(self, "encrypted", False)
        return found

    monkeypatch.setattr(MotoAmi, "block_device_mappings", property(with_encryption))


class MotoAccount:
    """Builds a real-looking account in moto: a VPC with subnets in two AZs, a self-referencing security group."""

    def __init__(self) -> None:
        session = make_session(None, None)
        self.ec2 = session.client("ec2")
        self.s3 = session.client("s3")
        self.kms = session.client("kms")
        self.secrets = session.client("secretsmanager")
        self.iam = session.client("iam")
        self.fsx = session.client("fsx")
        self.amp = session.client("amp")
        self.sagemaker = session.client("sagemaker")
        self.vpc = self.ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        self.subnet = self.make_subnet("10.0.0.0/20", AZ)
        self.other_subnet = self.make_subnet("10.0.16.0/24", OTHER_AZ)
        self.sg = self.security_group("nodes", self_referencing=True)

    def make_subnet(self, cidr: str, az: str, vpc: str | None = None) -> str:
        return str(
            self.ec2.create_subnet(VpcId=vpc or self.vpc, CidrBlock=cidr, AvailabilityZone=az)["Subnet"]["SubnetId"]
        )

    def security_group(self, name: str, self_referencing: bool) -> str:
        group = str(self.ec2.create_security_group(GroupName=name, Description=name, VpcId=self.vpc)["GroupId"])
        if self_referencing:
            self.ec2.authorize_security_group_ingress(
                GroupId=group, IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]}]
            )
            self.ec2.authorize_security_group_egress(
                GroupId=group, IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]}]
            )
        return group

    def file_system(self, kind: str, sg: str, subnet: str | None = None, **extra: Any) -> str:
        subnet = subnet or self.subnet
        params: dict[str, Any] = {"FileSystemType": kind, "StorageCapacity": 1200, "SubnetIds": [subnet]}
        fs_id = str(self.fsx.create_file_system(**params)["FileSystem"]["FileSystemId"])
        eni = self.ec2.create_network_interface(SubnetId=subnet, Groups=[sg])["NetworkInterface"]["NetworkInterfaceId"]
        from moto.fsx.models import fsx_backends

        record = fsx_backends[ACCOUNT][REGION].file_systems[fs_id]
        record.extra = {"Lifecycle": "AVAILABLE", "NetworkInterfaceIds": [eni], **extra}
        return fs_id

    def bucket(
        self, name: str, region: str = REGION, policy: dict[str, Any] | None = None, key: str | None = None
    ) -> str:
        client = self.s3 if region == REGION else make_session(None, region).client("s3")
        if region == "us-east-1":
            client.create_bucket(Bucket=name)
        else:
            client.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": region})
        if policy is not None:
            client.put_bucket_policy(Bucket=name, Policy=json.dumps(policy))
        if key is not None:
            client.put_bucket_encryption(
                Bucket=name,
                ServerSideEncryptionConfiguration={
                    "Rules": [
                        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key}}
                    ]
                },
            )
        return name

    def key(self, policy: dict[str, Any] | None = None, enabled: bool = True) -> str:
        params = {"Policy": json.dumps(policy)} if policy is not None else {}
        arn = str(self.kms.create_key(**params)["KeyMetadata"]["Arn"])
        if not enabled:
            self.kms.disable_key(KeyId=arn.rsplit("/", 1)[-1])
        return arn

    def image(self, encrypted: bool = False) -> str:
        instance = self.ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, SubnetId=self.subnet)
        image_id = str(
            self.ec2.create_image(InstanceId=instance["Instances"][0]["InstanceId"], Name=f"hp-{encrypted}")["ImageId"]
        )
        if encrypted:
            from moto.ec2.models import ec2_backends

            ami = ec2_backends[ACCOUNT][REGION].amis[image_id]
            ami.encrypted = True
        return image_id

    def cluster(self, name: str, instance_type: str, count: int, group: str = "workers") -> None:
        self.sagemaker.create_cluster(
            ClusterName=name,
            InstanceGroups=[
                {
                    "InstanceGroupName": group,
                    "InstanceType": instance_type,
                    "InstanceCount": count,
                    "LifeCycleConfig": {
                        "SourceS3Uri": "s3://sagemaker-lifecycle/lifecycle/",
                        "OnCreate": "on_create.sh",
                    },
                    "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/hp",
                    "ThreadsPerCore": 1,
                }
            ],
            VpcConfig={"SecurityGroupIds": [self.sg], "Subnets": [self.subnet]},
        )


# --- what every rule test uses ---------------------------------------------------------------------------------
@pytest.fixture(name="acct")
def acct_fixture() -> MotoAccount:
    return MotoAccount()


@pytest.fixture(name="fakes")
def fakes_fixture() -> AccountFakes:
    """SageMaker's quotas; three, so the p5 quota comes on the second page of ListServiceQuotas."""
    return AccountFakes(
        quotas={f"{P5} for cluster usage": 8, "ml.m5.xlarge for cluster usage": 4, "ml.c5.xlarge for cluster usage": 2}
    )


def config(acct: MotoAccount, **changes: Any) -> dict[str, Any]:
    """An existing-network config: a controller and four p5 workers, no storage, no observability."""
    base: dict[str, Any] = {
        "cluster_name": "c1",
        "network": {
            "vpc_id": acct.vpc,
            "subnet_id": acct.subnet,
            "security_group_id": acct.sg,
            "availability_zone": AZ,
        },
        "instance_groups": [
            {"name": "controller", "role": "controller", "instance_type": "ml.m5.xlarge", "count": 1},
            {"name": "workers", "instance_type": P5, "count": 4},
        ],
        "storage": None,
        "observability": {"enabled": False},
    }
    base.update(changes)
    return base


def check(rule_id: str, data: dict[str, Any], fakes: AccountFakes) -> tuple[list[Problem], Account]:
    """The rule's problems, run alone on a fresh account (its calls are its own)."""
    session = make_session(None, None)
    fakes.install(session)
    account = Account(session, now=lambda: NOW.timestamp())
    view = ClusterView.of_config(parse_model(data), region=REGION)
    rule = next(r for r in all_rules() if r.id == rule_id)
    return run_online(view, account, [rule]), account


def only(problems: list[Problem]) -> Problem:
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


def deployed_stack(acct: MotoAccount, workers_node_type: str) -> None:
    """The stack of cluster c1 (its template's cluster resource alone: what the rule reads)."""
    groups = [
        {"InstanceGroupName": "controller", "InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
        {"InstanceGroupName": "workers", "InstanceType": P5, "InstanceCount": 4},
    ]
    groups[0]["SlurmConfig"] = {"NodeType": "Controller"}
    groups[1]["SlurmConfig"] = {"NodeType": workers_node_type}
    properties = {"ClusterName": "c1", "InstanceGroups": groups, "Orchestrator": {"Slurm": {}}}
    template = {"Resources": {"Cluster": {"Type": "AWS::SageMaker::Cluster", "Properties": properties}}}
    make_session(None, None).client("cloudformation").create_stack(
        StackName="hyperpod-c1", TemplateBody=json.dumps(template)
    )
