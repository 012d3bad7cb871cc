"""The URLs a platform team hands out: a template's S3 URL and the CloudFormation console's quick-create link."""

from __future__ import annotations

from urllib.parse import quote


def _suffix(region: str) -> str:
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


def template_url(bucket: str, key: str, region: str) -> str:
    """The template's virtual-hosted S3 URL in the bucket's Region (what CloudFormation's TemplateURL takes)."""
    return f"https://{bucket}.s3.{region}.{_suffix(region)}/{quote(key)}"


def launch_url(template: str, stack_name: str, region: str) -> str:
    """The console page that creates a stack from ``template`` with ``stack_name`` filled in."""
    if region.startswith("cn-"):
        console = "https://console.amazonaws.cn"
    elif region.startswith("us-gov-"):
        console = "https://console.amazonaws-us-gov.com"
    else:
        console = f"https://{region}.console.aws.amazon.com"
    return (
        f"{console}/cloudformation/home?region={region}#/stacks/quickcreate"
        f"?templateURL={quote(template, safe='')}&stackName={quote(stack_name, safe='')}"
    )
