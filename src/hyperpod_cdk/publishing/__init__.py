"""Publishing a cluster as a template without CDK bootstrap: the key layout (:mod:`.layout`), synthesis into a
temporary cloud assembly (:mod:`.synth`), the content-addressed upload (:mod:`.upload`), the launch URLs
(:mod:`.urls`) and the ``hyperpod-cdk publish`` command (:mod:`.command`).

Nothing here imports aws_cdk or boto3 at import time.
"""
