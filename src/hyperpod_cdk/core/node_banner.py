"""jsii's Node.js end-of-life banner, silenced by the commands this project runs, never by importing the library.

jsii prints a many-line banner in every process that loads ``aws_cdk`` on a Node.js major it no longer
supports; the pinned CDK works on Node 20, which jsii lists as end-of-life. The project's rule: every command a
user runs from it is silent - ``cdk synth`` of the bundled ``app.py``, of a project ``hyperpod-cdk init`` wrote,
and ``hyperpod-cdk`` itself. Each of those entry points calls :func:`silence_node_end_of_life_banner` before
``aws_cdk`` loads. Importing ``hyperpod_cdk`` changes no environment variable: an app of one's own that embeds
the constructs decides for itself (call the function first, or set the variable).
"""

from __future__ import annotations

import os

VARIABLE = "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"
"""jsii reads it as a comma-separated list of Node.js majors not to warn about."""
SILENCED_MAJORS = ("20",)
"""The Node.js majors the project runs and tests on."""


def silence_node_end_of_life_banner() -> None:
    """Add :data:`SILENCED_MAJORS` to :data:`VARIABLE` in this process's environment (its children inherit it);
    majors already listed there stay. Call it before ``aws_cdk`` is imported: jsii starts Node.js then."""
    listed = [major.strip() for major in os.environ.get(VARIABLE, "").split(",") if major.strip()]
    os.environ[VARIABLE] = ",".join([*listed, *(major for major in SILENCED_MAJORS if major not in listed)])
