#!/usr/bin/env bash
# HyperPod entry point for lifecycle-driven Slurm (LifeCycleConfig.OnCreate): our runtime owns the node.
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/bootstrap.sh"
