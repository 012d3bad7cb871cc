# make synth: set up and synthesize the default cluster into cdk.out/ (no AWS credentials needed)
# make test:  set up and run every check: lint, types and the test suite
SHELL := /bin/bash
VENV := .venv
PYTHON := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_VERSION_CHECK := 1
export AWS_EC2_METADATA_DISABLED := true
CONFIG ?=
# Python 3.8 (HyperPod's older AMIs): the runtime's stdlib tests run on it too when this machine has one.
PY38 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.8.*/bin/python3.8) $(shell command -v python3.8 2>/dev/null))
VENV38 := .venv38
SCAN_VENV := .venv-scan
CHECKOV_VERSION := 3.3.30

SHELL_SCRIPTS := $(wildcard src/hyperpod_cdk/lifecycle_assets/*.sh hyperpod-local/src/hyperpod_local/*.sh scripts/*.sh examples/jobs/*.sbatch .ci/run)

.PHONY: setup system-packages node-rootfs synth test lint typecheck unit unit38 bench schema docs clean

setup: $(VENV)/.installed $(SCAN_VENV)/.installed-$(CHECKOV_VERSION) node_modules/.installed system-packages node-rootfs

# Slurm, munge, MariaDB and shellcheck for the local cluster (installs only what is missing; needs root)
system-packages:
	./scripts/install-system-packages.sh

# The emulated HyperPod platform's node root file system: Debian trixie with Slurm 24.11 (docs/local-cluster.md;
# about 25 s and 650 MB in /var/cache/hyperpod-cdk, once per package list; needs root and the Debian mirror)
node-rootfs: system-packages
	@if [ "$$(id -u)" -eq 0 ]; then ./scripts/build-node-rootfs.sh >/dev/null; \
	else echo "node-rootfs: skipped (needs root; the HyperPod-platform local tests skip without it)"; fi

$(VENV)/.installed: pyproject.toml hyperpod-local/pyproject.toml
	python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet --editable '.[dev]' --editable ./hyperpod-local
	touch $@

# checkov (the IaC scanner tests/test_scanners.py runs) in a venv of its own: its pins would fight ours.
$(SCAN_VENV)/.installed-$(CHECKOV_VERSION):
	python3 -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SCAN_VENV)/bin/python -m pip install --quiet "checkov==$(CHECKOV_VERSION)"
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

synth: setup
	npx --no-install cdk synth --quiet $(if $(CONFIG),--context config=$(CONFIG))
	@echo "Templates in cdk.out/: $$(ls cdk.out/*.template.json)"

test: lint typecheck unit unit38

lint: setup
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m ruff check --target-version py38 src/training_runtime
	shellcheck -x $(SHELL_SCRIPTS)

typecheck: setup
	$(PYTHON) -m mypy

unit: setup
	$(PYTHON) -m pytest

# The node runtime's stdlib-only tests (scripts/runtime_tests.py lists them) on Python 3.8.
unit38: setup
	@if [ -z "$(PY38)" ]; then echo "unit38: skipped: no Python 3.8 on this machine (set PY38=/path/to/python3.8)"; \
	else \
	  [ -x $(VENV38)/bin/pytest ] || { $(PY38) -m venv $(VENV38) && $(VENV38)/bin/pip install --quiet "pytest==8.3.5"; }; \
	  PYTHONPATH=src:tests $(VENV38)/bin/python -m pytest -q -p no:cacheprovider $$($(PYTHON) scripts/runtime_tests.py); \
	fi

schema: setup
	$(VENV)/bin/hyperpod-cdk schema > schema/cluster-config.schema.json

# Regenerate what the docs repeat from the code (tests fail when a committed copy is stale)
docs: schema
	$(PYTHON) -m hyperpod_cdk.rules > docs/rules.md
	$(PYTHON) scripts/gen_runtime_options_doc.py
	$(PYTHON) scripts/gen_dashboards.py

bench: setup
	$(PYTHON) bench/synth.py
	$(PYTHON) bench/validate.py
	$(PYTHON) bench/cli_startup.py
	$(PYTHON) bench/preflight.py

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache $(VENV38)
