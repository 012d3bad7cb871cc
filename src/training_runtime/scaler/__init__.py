"""The capacity scaler: a controller-side service that grows and shrinks HyperPod instance groups with the Slurm
queue (issue #24). :mod:`.spec` is its part of the parameters contract; the service itself never imports
bootstrap machinery."""
