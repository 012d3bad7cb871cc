"""The target-registration function's code: stdlib and boto3 only (a Lambda asset, like ``minter/``)."""
