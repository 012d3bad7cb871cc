"""The Slurm guard: a daemon on every HyperPod node that repairs the known ways HyperPod leaves Slurm's files broken.

HyperPod's agent rewrites slurm.conf and the topology files while the cluster runs, and its AMI and lifecycle
scripts write plugstack.conf; in 2026 each has left Slurm refusing jobs or ignoring ``--container-image``. The guard
notices a change within seconds (:mod:`.watch`), checks the known breakages (:mod:`.checks`), repairs the ones with
a safe repair and reports the others, as its table says (:mod:`.table`, which docs/node-runtime.md renders), and
logs, counts (:mod:`training_runtime.metrics.guard`) and alarms on each (:mod:`.service`). Stdlib only; it imports
none of the bootstrap (``plan``, ``steps``): the bootstrap installs it (``steps/guard.py``), it runs alone.
"""
