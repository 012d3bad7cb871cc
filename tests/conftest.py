"""Test configuration: CDK's built-in template validator stays off except in test_compliance.py."""

from __future__ import annotations

import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
