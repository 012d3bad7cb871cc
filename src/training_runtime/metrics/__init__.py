"""Node metrics: where exporters listen (:mod:`.ports`), the metric names the runtime configures and emits
(:mod:`.catalog`), the collector of Slurm and EFA metrics (:mod:`.collect`) and the GPU-to-job mapping the
Slurm prolog and epilog keep for dcgm-exporter (:mod:`.gpu_jobs`).

Job-time and collector code here imports only the standard library and the bottom layer of the runtime,
never bootstrap machinery (``steps``, ``plan``, ``apt``).
"""
