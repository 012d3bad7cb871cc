#!/usr/bin/env bash
# What `make synth` needs, and nothing else: Python 3.11 or newer, Node.js and npm. One message names all
# that is missing; exit 1 then. PYTHON3 names the interpreter to use (default python3).
set -euo pipefail
python=${PYTHON3:-python3}
missing=()
if ! command -v "$python" >/dev/null 2>&1; then
  missing+=("Python 3.11+ ($python not found; set PYTHON3=/path/to/python3.11)")
elif ! "$python" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  found=$("$python" -c 'import platform; print(platform.python_version())' 2>/dev/null || echo unknown)
  missing+=("Python 3.11+ ($python is $found, or lacks the venv module; set PYTHON3=/path/to/python3.11)")
fi
command -v node >/dev/null 2>&1 || missing+=("Node.js (https://nodejs.org, 20 or newer)")
command -v npm >/dev/null 2>&1 || missing+=("npm (comes with Node.js)")
if [ "${#missing[@]}" -ne 0 ]; then
  echo "make synth needs Python 3.11+, Node.js and npm, nothing else. Missing here:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi
