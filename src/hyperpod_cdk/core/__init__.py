"""The core: the config and its parts, the deployment it makes, the files the nodes get, the request HyperPod gets
(no aws_cdk import)."""
