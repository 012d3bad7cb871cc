"""The AWS account as the preflight rules see it: read-only look-ups, each made once, safe across threads.

Every call goes through :meth:`Account.call`, which records the IAM action it needs (so a test can hold each rule
to the actions it declares), answers None for "no such resource", and raises :class:`Unchecked` when the account
cannot answer: access denied, the API missing in the Region, or any other failure. The rule runner turns
:class:`Unchecked` into a warning naming the action; nothing here ever ends the command.

boto3 and botocore are imported only when a look-up runs (``hyperpod-cdk --help`` and ``validate`` import
neither).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hyperpod_cdk.aws.clients import ACCESS_DENIED, BAD_CREDENTIALS, RETRIES, error_code, error_message

NOT_AVAILABLE = {
    "UnknownOperationException",
    "InvalidAction",
    "UnsupportedOperation",
    "OptInRequired",
    "SubscriptionRequiredException",
}
"""Codes AWS answers when an API does not exist (or is not enabled) in the Region."""

IAM_ACTION_NAMES = {
    ("s3", "HeadBucket"): "s3:ListBucket",
    ("s3", "GetBucketEncryption"): "s3:GetEncryptionConfiguration",
}
"""Calls whose IAM action is not ``<service prefix>:<operation>`` (Service Authorization Reference, Amazon S3)."""


class Unchecked(Exception):
    """A look-up the account would not answer; ``action`` is the IAM action, ``reason`` says why."""

    def __init__(self, action: str, reason: str, denied: bool = False) -> None:
        super().__init__(f"{action}: {reason}")
        self.action = action
        self.reason = reason
        self.denied = denied


def iam_action(prefix: str, operation: str) -> str:
    """The IAM action a botocore operation needs: ``ec2:DescribeSubnets``, ``s3:ListBucket`` for HeadBucket."""
    return IAM_ACTION_NAMES.get((prefix, operation), f"{prefix}:{operation}")


@dataclass
class Account:
    """The session's clients and memoized look-ups. ``now`` is injected (training-plan dates are judged by it).

    :param session: a boto3 Session (hyperpod_cdk.ops.context.make_session).
    :param now: seconds since the epoch. Default: ``time.time``.
    """

    session: Any
    now: Callable[[], float] = time.time
    calls: list[tuple[str, str]] = field(default_factory=list)
    """(rule id, IAM action) of every call made, in order."""
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False)
    _locks: dict[Any, threading.Lock] = field(default_factory=dict, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _local: threading.local = field(default_factory=threading.local, repr=False)

    @property
    def region(self) -> str:
        return str(self.session.region_name or "")

    @property
    def account_id(self) -> str:
        """The caller's account (sts:GetCallerIdentity needs no permission)."""
        return str(self.once(("account",), lambda: self.call("sts", "get_caller_identity")["Account"]))

    # --- plumbing -------------------------------------------------------------------------------------------
    def acting_for(self, rule_id: str) -> None:
        """Attribute this thread's next calls to ``rule_id``."""
        self._local.rule = rule_id

    def client(self, service: str) -> Any:
        with self._guard:  # a boto3 Session is not thread-safe; its clients are
            if service not in self._clients:
                from botocore.config import Config

                self._clients[service] = self.session.client(
                    service, config=Config(retries=dict(RETRIES), user_agent_extra="hyperpod-cdk-preflight")
                )
            return self._clients[service]

    def once(self, key: Any, look_up: Callable[[], Any]) -> Any:
        """``look_up()`` the first time ``key`` is asked for; its answer (or its Unchecked) afterwards."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._memo:
                try:
                    self._memo[key] = (look_up(), None)
                except Unchecked as failure:
                    self._memo[key] = (None, failure)
            value, failed = self._memo[key]
        if failed is not None:
            raise failed
        return value

    def call(self, service: str, method: str, *, missing: frozenset[str] = frozenset(), **params: Any) -> Any:
        """One API call; None when the error code is in ``missing`` (no such resource); Unchecked on failure."""
        from botocore import exceptions as bx

        client = self.client(service)
        operation = client.meta.method_to_api_mapping[method]
        action = iam_action(client.meta.service_model.signing_name, operation)
        if service != "sts":
            with self._guard:
                self.calls.append((getattr(self._local, "rule", ""), action))
        try:
            return getattr(client, method)(**params)
        except bx.ClientError as error:
            code = error_code(error)
            if code in missing:
                return None
            if code in ACCESS_DENIED or code == "403":
                raise Unchecked(action, "access denied", denied=True) from None
            if code in NOT_AVAILABLE:
                raise Unchecked(action, f"not available in {self.region} ({code})") from None
            if code in BAD_CREDENTIALS:
                raise Unchecked(action, f"AWS rejected the credentials ({code})") from None
            raise Unchecked(action, f"failed ({code}: {error_message(error)})") from None
        except (bx.EndpointConnectionError, bx.UnknownEndpointError) as error:
            raise Unchecked(action, f"no endpoint in {self.region} ({error})") from None

    def pages(self, service: str, method: str, key: str, **params: Any) -> Iterator[Any]:
        """Every item under ``key`` across a paginated call's pages."""
        while True:
            page = self.call(service, method, **params)
            yield from page.get(key, [])
            if not page.get("NextToken"):
                return
            params = {**params, "NextToken": page["NextToken"]}
