"""Importing this registers the preflight rules (``needs=("aws", ...)``) in the rule registry, in this order.

``hyperpod_cdk.rules`` imports it, so the rules reference lists them; none of these modules imports boto3.
"""

from __future__ import annotations

from hyperpod_cdk.preflight import checks_access as _access  # noqa: F401
from hyperpod_cdk.preflight import checks_capacity as _capacity  # noqa: F401
from hyperpod_cdk.preflight import checks_network as _network  # noqa: F401
from hyperpod_cdk.preflight import checks_storage as _storage  # noqa: F401
