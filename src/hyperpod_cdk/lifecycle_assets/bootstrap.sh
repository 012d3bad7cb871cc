#!/usr/bin/env bash
# Shared body of the HyperPod lifecycle entry points (on_create.sh, on_init_complete.sh): runs the node
# runtime that sits beside this script. Output goes to stdout (HyperPod sends it to CloudWatch) and to
# /var/log/hyperpod-cdk/bootstrap.log on the node; a failure ends with one line naming the failed step.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log_file=/var/log/hyperpod-cdk/bootstrap.log
mkdir -p "$(dirname "$log_file")"
# The log holds failed commands' arguments and output: root only (mode 600, an older world-readable one too). Only the
# log: the runtime keeps root's umask, since the programs it runs (pip, mkdir of parent directories) create what users
# must read by the umask.
(umask 077 && : >>"$log_file") && chmod 600 "$log_file"
lines_before=$(wc -l < "$log_file" 2>/dev/null || echo 0)
PYTHONPATH="$here" python3 -m training_runtime bootstrap --assets-dir "$here" 2>&1 | tee -a "$log_file"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  reason=$(tail -n "+$((lines_before + 1))" "$log_file" | grep -a '^hyperpod-cdk: FAILED' | tail -n 1)
  echo "${reason:-hyperpod-cdk: FAILED: the runtime exited $status}; full log: $log_file" >&2
fi
exit "$status"
