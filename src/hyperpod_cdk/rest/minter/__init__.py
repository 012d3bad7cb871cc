"""The token-minting function's code: stdlib and boto3 only, the Lambda Python runtime's own (docs/rest-api.md)."""
