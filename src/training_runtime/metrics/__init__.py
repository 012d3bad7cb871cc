"""The metrics the node runtime's exporters emit (catalog) and where they listen."""
