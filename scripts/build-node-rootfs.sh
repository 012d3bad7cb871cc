#!/usr/bin/env bash
# The local cluster's node root file system is built by the script hyperpod-local ships (its package data):
# hyperpod-local/src/hyperpod_local/build-node-rootfs.sh. This entry point stays for `make setup`.
set -euo pipefail
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/hyperpod-local/src/hyperpod_local/build-node-rootfs.sh" "$@"
