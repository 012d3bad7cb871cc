# make synth: synthesize the default cluster into cdk.out/ (no AWS credentials). Needs Python 3.11+, Node.js
#             and npm, nothing else: it installs the package (pinned, requirements/constraints.txt) and the CDK CLI.
# make test:  set up everything (dev tools, the scanner's venv, and, where the machine can have them, the local
#             cluster's Debian packages and node root file system) and run every check: lint, types, the tests.
# make test-fast: the quick loop: the `unit` tier less its `slow` and `compliance` tests, lint, the Python 3.8 run.
# make drill-hostile: the hostile-user drill alone (an ordinary user's ways in, each must fail; in make test).
# make test-calendar: the date-sensitive tests (marker `calendar`) under three clocks moved by libfaketime (part of make test).
# make mutants: check that every curated mutation (tests/mutations/*.yaml) still applies, then run them all.
SHELL := /bin/bash
VENV := .venv
PYTHON := $(VENV)/bin/python
PYTHON3 ?= python3
export PYTHON3
CONSTRAINTS := requirements/constraints.txt
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_VERSION_CHECK := 1
export AWS_EC2_METADATA_DISABLED := true
# Python writes the bytecode of what it imports, so each of the suite's hundreds of Python processes (pytest's
# workers, the CLI under test, the helpers it starts) stops recompiling aws-cdk-lib from source: with
# PYTHONDONTWRITEBYTECODE set in the caller's environment, collecting the tests took 2.7x the CPU on a fresh venv
# (bench/suite_collection.py, docs/benchmarks.md).
unexport PYTHONDONTWRITEBYTECODE
CONFIG ?=
# Python 3.8 (HyperPod's older AMIs): the runtime's stdlib tests run on it too when this machine has one.
PY38 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.8.*/bin/python3.8) $(shell command -v python3.8 2>/dev/null))
VENV38 := .venv38
SCAN_VENV := .venv-scan
CHECKOV_VERSION := 3.3.30

SHELL_SCRIPTS := $(wildcard src/hyperpod_cdk/lifecycle_assets/*.sh hyperpod-local/src/hyperpod_local/*.sh scripts/*.sh examples/jobs/*.sbatch .ci/run)

.PHONY: prerequisites setup system-packages node-rootfs libfaketime scanner synth test test-fast lint typecheck unit unit-tier local-tier unit38 mutants bench schema docs lock clean
.PHONY: test-calendar drill-hostile _lint _typecheck _unit-tier _local-tier _unit38 _calendar

prerequisites:
	@./scripts/check-prerequisites.sh

# Everything `make test` uses. The local cluster's parts install only where the machine can have them (Debian or
# Ubuntu, root); elsewhere each says so once and its tests skip.
# Its parts install side by side (make -j): the venvs, npm's packages and the Debian packages, then the roots.
SETUP_PARTS := $(VENV)/.installed-dev scanner node_modules/.installed system-packages node-rootfs libfaketime
setup:
	@$(MAKE) --no-print-directory -j4 $(SETUP_PARTS)

# Slurm, munge, MariaDB and shellcheck for the local cluster (installs only what is missing; needs root and apt)
system-packages:
	@./scripts/install-system-packages.sh

# libfaketime for make test-calendar, built from Debian's source into .tools/ (sha256-pinned; seconds; why not
# Debian's binary package: the script's header)
LIBFAKETIME := .tools/libfaketime
libfaketime:
	@./scripts/install-libfaketime.sh $(LIBFAKETIME)

# The local cluster's node root file systems, one per Debian suite hyperpod_local/rootfs.py names: trixie (Slurm
# 24.11, the HyperPod platform's) and forky (Slurm's next major, 26.05). docs/local-cluster.md; about 1 min and
# 650 MB each in /var/cache/hyperpod-cdk, once per package list; needs root and the Debian mirror.
ROOTFS_SUITES := trixie forky
node-rootfs: system-packages
	@if [ "$$(id -u)" -ne 0 ]; then echo "node-rootfs: skipped (needs root; the HyperPod-platform local tests skip without it)"; \
	elif ! command -v mmdebstrap >/dev/null; then echo "node-rootfs: skipped (needs mmdebstrap: a Debian or Ubuntu machine)"; \
	else for suite in $(ROOTFS_SUITES); do ./scripts/build-node-rootfs.sh --suite $$suite >/dev/null || exit 1; done; fi

# The package and its pinned dependencies: all `make synth` needs of Python. --no-compile: byte-compiling all of
# aws-cdk-lib took 35 of the 45 s this step took on a fresh clone; Python compiles what an import needs, once.
PIP_INSTALL := $(PYTHON) -m pip install --quiet --no-compile --constraint $(CONSTRAINTS)
$(VENV)/.installed-app: pyproject.toml $(CONSTRAINTS) | prerequisites
	$(PYTHON3) -m venv $(VENV)
	$(PIP_INSTALL) --editable .
	touch $@

# The test and dev tools, and the emulator (hyperpod-local), on top.
$(VENV)/.installed-dev: $(VENV)/.installed-app hyperpod-local/pyproject.toml
	$(PIP_INSTALL) --editable '.[dev]' --editable ./hyperpod-local
	touch $@

# checkov (the IaC scanner tests/test_scanners.py runs) in a venv of its own: its pins would fight ours.
scanner: $(SCAN_VENV)/.installed-$(CHECKOV_VERSION)
$(SCAN_VENV)/.installed-$(CHECKOV_VERSION): | prerequisites
	$(PYTHON3) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SCAN_VENV)/bin/python -m pip install --quiet "checkov==$(CHECKOV_VERSION)"
	touch $@

node_modules/.installed: package.json package-lock.json | prerequisites
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

synth: $(VENV)/.installed-app node_modules/.installed
	npx --no-install cdk synth --quiet $(if $(CONFIG),--context config=$(CONFIG))
	@echo "Templates in cdk.out/: $$(ls cdk.out/*.template.json)"

# The tiers (docs/testing.md): the `unit` tier (no local cluster) and the `local` tier (local clusters, root) run
# side by side, each in a pytest of its own with LANE_WORKERS processes (pytest-xdist), beside lint, mypy and the
# Python 3.8 run; each part's output is printed whole when it ends, and each pytest lists its slowest tests.
LANE_WORKERS ?= 2
PYTEST_LANE = $(PYTHON) -m pytest -n $(LANE_WORKERS) --dist loadscope --no-loadscope-reorder --durations=15 --durations-min=5
PARTS = $(MAKE) --no-print-directory --keep-going -j5 --output-sync=target
# make test-fast's lane alone runs three workers on two cores: its thousands of short tests wait on subprocesses,
# moto and files a quarter of the time, so a third worker fills it (2 m 35 s against 3 m 0 s, docs/benchmarks.md).
FAST_WORKERS ?= 3

test: setup
	@$(PARTS) _lint _typecheck _unit-tier _local-tier _unit38 _calendar

# The quick loop: the unit tier less its slow and compliance tests (each 5 s or more, or CDK's validator and
# cdk-nag: `make test` runs them), beside lint and the 3.8 run.
test-fast: setup
	@$(PARTS) _lint _unit-quick _unit38

lint: setup
	@$(MAKE) --no-print-directory _lint
typecheck: setup
	@$(MAKE) --no-print-directory _typecheck
unit-tier: setup
	@$(MAKE) --no-print-directory _unit-tier
local-tier: setup
	@$(MAKE) --no-print-directory _local-tier
unit: setup
	@$(PARTS) _unit-tier _local-tier
unit38: setup
	@$(MAKE) --no-print-directory _unit38
test-calendar: setup
	@$(MAKE) --no-print-directory _calendar
# The hostile-user drill alone (tests/hostile_drill.py; in the local tier of make test)
drill-hostile: setup
	$(PYTHON) -m pytest -n $(LANE_WORKERS) --dist loadscope -m hostile

_lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) -m ruff check --target-version py38 src/training_runtime
	@if command -v shellcheck >/dev/null; then shellcheck -x $(SHELL_SCRIPTS); \
	else echo "lint: shell scripts not checked: no shellcheck here (make system-packages, or your package manager)"; fi

_typecheck:
	$(PYTHON) -m mypy

_unit-tier:
	$(PYTEST_LANE) -m "not local"

_unit-quick:
	$(PYTEST_LANE) -n $(FAST_WORKERS) -m "not local and not slow and not compliance"

_local-tier:
	$(PYTEST_LANE) -m local

# The node runtime's stdlib-only tests (scripts/runtime_tests.py lists them) on Python 3.8.
_unit38:
	@if [ -z "$(PY38)" ]; then echo "unit38: skipped: no Python 3.8 on this machine (set PY38=/path/to/python3.8)"; \
	else \
	  [ -x $(VENV38)/bin/pytest ] || { $(PY38) -m venv $(VENV38) && $(VENV38)/bin/pip install --quiet "pytest==8.3.5"; }; \
	  PYTHONPATH=src:tests $(VENV38)/bin/python -m pytest -q -p no:cacheprovider $$($(PYTHON) scripts/runtime_tests.py); \
	fi

# The tests that meet a real clock (marker `calendar`; tests/clock.py) under libfaketime, one pytest per clock, the
# three side by side, each one's output printed whole at the end: a year
# and a month on, the last second of a month, the first minute of a new year (each clock starts there and runs on, so a
# run also crosses the boundary). Only the wall clock moves (--exclude-monotonic): sleeps and timeouts keep their
# length. docs/testing.md "The calendar".
CALENDAR_CLOCKS := +400d|@2027-01-31 23:59:59|@2028-01-01 00:00:30
# Only the files that hold a marked test are collected: collecting the whole suite was most of each run (20 s of 22).
CALENDAR_FILES = $(shell grep -l 'mark\.calendar' tests/test_*.py)
_calendar:
	@if [ ! -x $(LIBFAKETIME)/bin/faketime ]; then echo "calendar: skipped: no libfaketime here (make libfaketime)"; \
	else clocks='$(CALENDAR_CLOCKS)'; IFS='|'; out=$$(mktemp -d); n=0; \
	for clock in $$clocks; do n=$$((n + 1)); \
	  { echo "calendar: clock $$clock"; \
	    $(LIBFAKETIME)/bin/faketime --exclude-monotonic -f "$$clock" $(PYTHON) -m pytest -q -p no:cacheprovider \
	      -m calendar $(CALENDAR_FILES) 2>&1; echo $$? > $$out/$$n.status; } > $$out/$$n.log & \
	done; wait; unset IFS; status=0; \
	for i in $$(seq $$n); do cat $$out/$$i.log; [ "$$(cat $$out/$$i.status)" = 0 ] || status=1; done; \
	rm -rf $$out; exit $$status; fi

# The curated mutations: first that each still applies (text found once, tests present), then each caught.
mutants: setup
	$(PYTHON) scripts/mutants.py --check
	$(PYTHON) scripts/mutants.py

schema: $(VENV)/.installed-app
	$(VENV)/bin/hyperpod-cdk schema > schema/cluster-config.schema.json

# Regenerate what the docs repeat from the code (tests fail when a committed copy is stale)
docs: setup schema
	$(PYTHON) -m hyperpod_cdk.rules > docs/rules.md
	cp node_modules/aws-cdk/lib/init-templates/.recommended-feature-flags.json src/hyperpod_cdk/data/recommended-feature-flags.json
	cp package-lock.json src/hyperpod_cdk/data/cdk-cli-lock.json
	$(PYTHON) scripts/gen_runtime_options_doc.py && $(PYTHON) scripts/gen_update_policies_doc.py && $(PYTHON) scripts/gen_construct_reference.py && $(PYTHON) scripts/gen_parameters_example.py && $(PYTHON) scripts/gen_module_index.py && $(PYTHON) scripts/gen_step_list.py && $(PYTHON) scripts/gen_local_commands.py && $(PYTHON) scripts/gen_plan_example.py && $(PYTHON) scripts/gen_operator_permissions.py && $(PYTHON) scripts/gen_guard_table.py
	$(PYTHON) scripts/gen_dashboards.py
	$(PYTHON) scripts/gen_hyperpod_facts.py
	$(PYTHON) scripts/gen_slurm_security.py
	$(PYTHON) scripts/gen_instance_facts.py
	$(PYTHON) scripts/gen_instance_regions.py

bench: setup
	$(PYTHON) bench/synth.py
	$(PYTHON) bench/validate.py
	$(PYTHON) bench/cli_startup.py
	$(PYTHON) bench/preflight.py
	$(PYTHON) bench/scaler_sim.py

# requirements/constraints.txt from the dev venv (after changing a pin in pyproject.toml or package versions)
lock: $(VENV)/.installed-dev
	{ sed -n '1,2p' $(CONSTRAINTS); $(PYTHON) -m pip freeze --exclude-editable | sed 's/+cpu$$//'; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache $(VENV38)
