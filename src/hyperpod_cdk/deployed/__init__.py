"""What is deployed: a stack's template and parameters file read back (:mod:`.stack`), the config they
amount to (:mod:`.config`), drift, the deployed roles and counts kept at synth."""
