#!/usr/bin/env bash
# HyperPod entry point for API-driven Slurm (LifeCycleConfig.OnInitComplete): HyperPod has configured
# Slurm and mounted FSx before this runs; our runtime adds the rest.
set -euo pipefail
exec bash "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/bootstrap.sh"
