#!/usr/bin/env bash
# Shared body of the HyperPod lifecycle entry points (on_create.sh, on_init_complete.sh):
# runs the bundled node runtime from the directory HyperPod downloaded this prefix into.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log_file=/var/log/hyperpod-cdk/bootstrap.log
mkdir -p "$(dirname "$log_file")"
if ! PYTHONPATH="$here" python3 -m training_runtime bootstrap --assets-dir "$here" 2>&1 | tee -a "$log_file"; then
  echo "hyperpod-cdk: node bootstrap failed; see $log_file and the JSON 'failed' line above" >&2
  exit 1
fi
