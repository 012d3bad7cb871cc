"""The instance role's credentials from IMDSv2, cached until shortly before they expire.

AWS: "Retrieve security credentials from instance metadata" (EC2 user guide, instance-metadata-security-
credentials.html): ``PUT /latest/api/token``, then ``GET /latest/meta-data/iam/security-credentials/`` (the role
name) and ``.../<role>`` (``AccessKeyId``, ``SecretAccessKey``, ``Token``, ``Expiration``). The metadata service's
address is injected (the local cluster's fake; EC2's 169.254.169.254 by default, as the Spot watcher).
"""

from __future__ import annotations

import calendar
import json
import time
import urllib.error
from typing import Callable, Optional

from training_runtime.scaler.sigv4 import Credentials, CredentialsError
from training_runtime.spot import IMDS_URL, Imds, ImdsError

ROLE_PATH = "/latest/meta-data/iam/security-credentials/"
REFRESH_BEFORE_S = 300.0
"""Credentials are fetched again this long before ``Expiration`` (AWS rotates them well before that)."""


def parse_expiration(text: str) -> float:
    """``2026-11-26T07:00:00Z`` -> epoch seconds."""
    return float(calendar.timegm(time.strptime(text.replace(".000", ""), "%Y-%m-%dT%H:%M:%SZ")))


class RoleCredentials:
    """Callable: the current credentials (fetched on first use and again near their expiry)."""

    def __init__(self, imds_url: str = IMDS_URL, clock: Callable[[], float] = time.time) -> None:
        self.imds = Imds(imds_url, timeout_s=5.0, clock=clock)
        self.clock = clock
        self._cached: Optional[Credentials] = None

    def _get(self, path: str) -> str:
        try:
            return self.imds._request("GET", path, {"X-aws-ec2-metadata-token": self.imds.token()})
        except urllib.error.HTTPError as error:
            if error.code == 401:
                self.imds._token = None
            raise ImdsError("GET {}: HTTP {}".format(path, error.code)) from None
        except (urllib.error.URLError, OSError) as error:
            raise ImdsError("GET {}: {}".format(path, error)) from None

    def __call__(self) -> Credentials:
        """The credentials; a :class:`CredentialsError` (never a bare :class:`ImdsError`) when the metadata service
        does not give them."""
        cached = self._cached
        if cached is not None and (cached.expires is None or self.clock() < cached.expires - REFRESH_BEFORE_S):
            return cached
        try:
            return self._fetch()
        except ImdsError as error:
            raise CredentialsError("instance role credentials from {}: {}".format(self.imds.base_url, error)) from None

    def _fetch(self) -> Credentials:
        role = self._get(ROLE_PATH).strip().splitlines()
        if not role:
            raise ImdsError("{}: no instance role (the instance profile is missing)".format(ROLE_PATH))
        text = self._get(ROLE_PATH + role[0].strip())
        try:
            data = json.loads(text)
            creds = Credentials(
                access_key=str(data["AccessKeyId"]),
                secret_key=str(data["SecretAccessKey"]),
                token=str(data["Token"]) if data.get("Token") else None,
                expires=parse_expiration(str(data["Expiration"])) if data.get("Expiration") else None,
            )
        except (ValueError, KeyError, TypeError):
            raise ImdsError("{}{}: not role credentials".format(ROLE_PATH, role[0])) from None
        self._cached = creds
        return creds
