"""The emulated Secrets Manager of a local cluster: the REST API's signing key (``rest_api``), on the control plane.

The control plane's endpoint serves it beside SageMaker (``X-Amz-Target: secretsmanager.<Operation>``, signed for
``secretsmanager`` with the instance role's keys: :mod:`.protocol`), so the controller reads the key the way a
HyperPod controller does (the instance role, SigV4, ``GetSecretValue``) and a test rotates it with boto3
(``PutSecretValue``). The operations and their staging labels are AWS's (Secrets Manager API reference):

* ``GetSecretValue``: "If you don't specify either a VersionStage or VersionId, Secrets Manager returns the AWSCURRENT
  version"; ``SecretId``: "The ARN or name of the secret";
* ``PutSecretValue``: "Secrets Manager automatically attaches the staging label AWSCURRENT to this version" and "If
  this operation moves the staging label AWSCURRENT from another version to this version, then Secrets Manager also
  automatically moves the staging label AWSPREVIOUS to the version that AWSCURRENT was removed from";
* ``PutSecretValue``'s ``ClientRequestToken``: "If the ClientRequestToken value isn't already associated with a
  version of the secret then a new version of the secret is created." / "If a version with this value already exists
  and that version's SecretString or SecretBinary values are the same as those in the request then the request is
  ignored. The operation is idempotent." / "If a version with this value already exists and the version of the
  SecretString and SecretBinary values are different from those in the request, then the request fails because you
  can't modify a secret version." / "This value becomes the VersionId of the new version." The failure is
  ``ResourceExistsException`` (API model: "A resource with the ID you requested already exists."): the login pool's
  nodes race on it (:mod:`training_runtime.login_pool.host_keys`);
* the secret's value when the stack creates it: CloudFormation's ``GenerateSecretString`` (:func:`generated`): the
  REST API's key, and the login pool's host-key placeholder (:func:`login_host_keys_name`).

The store is a JSON file in the control plane's directory (root only), so a restarted control plane keeps it.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import string
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from hyperpod_cdk.core.rest_api_config import KEY_LENGTH  # the length the stack generates (docs/rest-api.md)
from hyperpod_local.control_plane.model import ApiError
from hyperpod_local.layout import LOCAL_ACCOUNT, LOCAL_REGION

TARGET_PREFIX = "secretsmanager."
SERVICE = "secretsmanager"
CURRENT, PREVIOUS = "AWSCURRENT", "AWSPREVIOUS"


def rest_key_name(cluster_name: str) -> str:
    return f"{cluster_name}-rest-api-key"


def login_host_keys_name(cluster_name: str) -> str:
    """The login pool's host-key secret: the stack creates it with a generated placeholder, the first login node
    replaces that with the pool's keys."""
    return f"{cluster_name}-login-host-keys"


def secret_arn(name: str, region: str = LOCAL_REGION) -> str:
    """The secret's ARN: AWS appends six random characters to the name; here they derive from it, so the parameters
    file can name the secret before the control plane creates it."""
    suffix = hashlib.sha256(name.encode()).hexdigest()[:6]
    return f"arn:aws:secretsmanager:{region}:{LOCAL_ACCOUNT}:secret:{name}-{suffix}"


def generated(length: int = KEY_LENGTH) -> str:
    """A value as ``GenerateSecretString`` with ``ExcludePunctuation`` makes it: letters and digits."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def not_found() -> ApiError:
    return ApiError("ResourceNotFoundException", "Secrets Manager can't find the specified secret.")


class SecretStore:
    """The secrets, their versions and staging labels, in ``path`` (0600)."""

    def __init__(self, path: Path, clock: Any = time.time) -> None:
        self.path = path
        self.clock = clock
        self.lock = threading.Lock()

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _save(self, data: dict[str, Any]) -> None:
        temporary = self.path.with_suffix(".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
        temporary.replace(self.path)

    def create(self, name: str, value: str) -> str:
        """A secret with one version (AWSCURRENT) unless ``name`` exists; its ARN."""
        with self.lock:
            data = self._load()
            arn = secret_arn(name)
            if arn not in data:
                version = str(uuid.uuid4())
                data[arn] = {
                    "Name": name,
                    "CreatedDate": self.clock(),
                    "Versions": {version: {"SecretString": value, "Stages": [CURRENT], "Created": self.clock()}},
                }
                self._save(data)
            return arn

    def put(self, arn: str, value: str) -> None:
        """``value`` as the current version of the secret ``arn``, created if new (a secret the user made outside the
        stack, named by its full ARN, as the directory's bind password is)."""
        with self.lock:
            data = self._load()
            if arn not in data:
                data[arn] = {"Name": arn.split(":secret:")[-1], "CreatedDate": self.clock(), "Versions": {}}
            versions = data[arn]["Versions"]
            for version in versions.values():
                version["Stages"] = [s for s in version["Stages"] if s != CURRENT]
            versions[str(uuid.uuid4())] = {"SecretString": value, "Stages": [CURRENT], "Created": self.clock()}
            for old in [v for v, version in versions.items() if not version["Stages"]]:
                del versions[old]
            self._save(data)

    def _find(self, data: dict[str, Any], secret_id: Any) -> str:
        if isinstance(secret_id, str):
            for arn, secret in data.items():
                if secret_id in (arn, secret["Name"]):
                    return arn
        raise not_found()

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"op_{operation}", None)
        if handler is None:
            raise ApiError("UnknownOperationException", f"secretsmanager.{operation} is not emulated by hyperpod-local")
        with self.lock:
            answer: dict[str, Any] = handler(params)
            return answer

    def op_GetSecretValue(self, params: dict[str, Any]) -> dict[str, Any]:
        data = self._load()
        arn = self._find(data, params.get("SecretId"))
        versions = data[arn]["Versions"]
        wanted_id, stage = params.get("VersionId"), params.get("VersionStage")
        if wanted_id is None and stage is None:
            stage = CURRENT
        for version_id, version in versions.items():
            if (wanted_id is None or wanted_id == version_id) and (stage is None or stage in version["Stages"]):
                return {
                    "ARN": arn,
                    "Name": data[arn]["Name"],
                    "VersionId": version_id,
                    "SecretString": version["SecretString"],
                    "VersionStages": list(version["Stages"]),
                    "CreatedDate": version["Created"],
                }
        raise not_found()

    def op_PutSecretValue(self, params: dict[str, Any]) -> dict[str, Any]:
        value = params.get("SecretString")
        if not isinstance(value, str) or not value:
            raise ApiError("InvalidParameterException", "You must provide either SecretString or SecretBinary.")
        data = self._load()
        arn = self._find(data, params.get("SecretId"))
        versions = data[arn]["Versions"]
        version_id = str(params.get("ClientRequestToken") or uuid.uuid4())
        if version_id in versions:
            if versions[version_id]["SecretString"] != value:
                raise ApiError("ResourceExistsException", "A resource with the ID you requested already exists.")
            stages = list(versions[version_id]["Stages"])  # the same version again: ignored
            return {"ARN": arn, "Name": data[arn]["Name"], "VersionId": version_id, "VersionStages": stages}
        for version in versions.values():
            version["Stages"] = [s for s in version["Stages"] if s != PREVIOUS]
            if CURRENT in version["Stages"]:
                version["Stages"] = [s for s in version["Stages"] if s != CURRENT] + [PREVIOUS]
        versions[version_id] = {"SecretString": value, "Stages": [CURRENT], "Created": self.clock()}
        for old in [v for v, version in versions.items() if not version["Stages"]]:
            del versions[old]  # AWS keeps unlabelled versions a while; nothing here reads them
        self._save(data)
        return {"ARN": arn, "Name": data[arn]["Name"], "VersionId": version_id, "VersionStages": [CURRENT]}

    def op_DescribeSecret(self, params: dict[str, Any]) -> dict[str, Any]:
        data = self._load()
        arn = self._find(data, params.get("SecretId"))
        stages = {v: list(version["Stages"]) for v, version in data[arn]["Versions"].items()}
        return {"ARN": arn, "Name": data[arn]["Name"], "VersionIdsToStages": stages}
