"""The emulated SageMaker HyperPod control plane: the cluster API of a local cluster, on AWS's terms.

- :mod:`.protocol`: the SageMaker JSON protocol over HTTP (awsJson1_1), each request's SigV4 checked (:mod:`.sigv4`);
- :mod:`.operations`: the operations, validated (:mod:`.validation`), over a backend that runs instances;
- :mod:`.model`: the cluster, groups and nodes; :mod:`.events`: ListClusterEvents' records;
- :mod:`.fleet`: the nodes' lives (launch latency, capacity); :mod:`.memory`: an in-memory backend (unit tests);
  :mod:`.nodes`: the backend of a running ``LocalCluster``; :mod:`.local`: its process, knobs and credentials.

docs/local-cluster.md, "Emulated control plane", says what is emulated, what is not, and the knobs.
"""
