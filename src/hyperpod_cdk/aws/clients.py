"""boto3 clients the ecosystem's way, and AWS errors turned into one line each.

Clients use botocore's adaptive retry mode (client-side rate limiting plus retries on throttling) and the
standard settings: AWS_PROFILE / --profile, AWS_REGION / --region, AWS_ENDPOINT_URL(_<SERVICE>).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from hyperpod_cdk.aws.errors import Exit, OpsError

RETRIES = {"mode": "adaptive", "total_max_attempts": 8}
"""8 attempts: HyperPod's control-plane APIs throttle at a few calls per second per account."""

ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "NotAuthorized"}
BAD_CREDENTIALS = {
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
}
THROTTLED = {"ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded"}


class Aws:
    """One boto3 Session and the clients made from it, each made once."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self._clients: dict[str, Any] = {}

    @property
    def region(self) -> str:
        return str(self.session.region_name or "")

    def client(self, service: str) -> Any:
        if service not in self._clients:
            from botocore.config import Config

            self._clients[service] = self.session.client(
                service, config=Config(retries=dict(RETRIES), user_agent_extra="hyperpod-cdk-ops")
            )
        return self._clients[service]

    @property
    def sagemaker(self) -> Any:
        return self.client("sagemaker")


def error_code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def error_message(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Message", "")) or str(error)


@contextlib.contextmanager
def aws_errors() -> Iterator[None]:
    """Turns credential, Region, access and throttling failures into an OpsError with one clear line."""
    from botocore import exceptions as bx

    try:
        yield
    except (bx.NoCredentialsError, bx.PartialCredentialsError) as error:
        raise OpsError(
            f"no AWS credentials ({error}): set AWS_PROFILE (or pass --profile) to a configured profile, "
            "run `aws sso login` for an SSO profile, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
            Exit.ACCESS,
        ) from None
    except bx.ProfileNotFound as error:
        raise OpsError(f"{error}: check --profile / AWS_PROFILE against ~/.aws/config", Exit.ACCESS) from None
    except (bx.SSOTokenLoadError, bx.UnauthorizedSSOTokenError, bx.TokenRetrievalError) as error:
        raise OpsError(f"the SSO session has expired ({error}): run `aws sso login`", Exit.ACCESS) from None
    except bx.NoRegionError:
        raise OpsError("no AWS Region: pass --region or set AWS_REGION", Exit.USAGE) from None
    except bx.EndpointConnectionError as error:
        raise OpsError(f"cannot reach AWS: {error}", Exit.FAILED) from None
    except bx.ClientError as error:
        code = error_code(error)
        operation = getattr(error, "operation_name", "the call")
        if code in ACCESS_DENIED:
            raise OpsError(
                f"access denied to {operation}: {error_message(error)} "
                "(the caller's IAM policy must allow it; see docs/operations.md, Permissions)",
                Exit.ACCESS,
            ) from None
        if code in BAD_CREDENTIALS:
            raise OpsError(
                f"AWS rejected the credentials ({code}) in {operation}: refresh them (aws sso login, or new keys)",
                Exit.ACCESS,
            ) from None
        if code in THROTTLED:
            raise OpsError(
                f"{operation} was still throttled after {RETRIES['total_max_attempts']} attempts: try again later",
                Exit.FAILED,
            ) from None
        if code in ("ResourceNotFound", "ResourceNotFoundException"):
            raise OpsError(f"{operation}: {error_message(error)}", Exit.NOT_FOUND) from None
        raise OpsError(f"{operation} failed ({code}): {error_message(error)}", Exit.FAILED) from None
