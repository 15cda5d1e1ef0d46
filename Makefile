# ledgercache: run `make help` for the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.deps-installed
export PYSPARK_PYTHON := $(abspath $(VPY))
# The wheel users install: Cargo profile `dist` (release without debug info), linked by zig against
# glibc 2.28 so that it installs on manylinux_2_28 systems (RHEL 8, Debian 10, Ubuntu 20.04 and newer).
# zig's and cargo-zigbuild's caches go to target/cache, like everything else the build makes.
MANYLINUX := manylinux_2_28
WHEELS := target/wheels
WHEEL_VENV := target/wheel-venv

# The wheel is a file target: rebuilt only when what goes into it changed, so one CI run (the
# cluster test in `make test`, then `make wheel-check`) builds it once.
WHEEL_STAMP := $(WHEELS)/.built
WHEEL_INPUTS := $(shell find src python -type f -not -name '*.so' -not -path '*/__pycache__/*') \
	Cargo.toml Cargo.lock pyproject.toml README.md

.PHONY: help venv build test test-rust test-python test-cluster bench bench-all lint wheel wheel-check demo docs clean

help: ## Show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

$(STAMP): requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

venv: $(STAMP) ## Create .venv with the Python build and test tools

build: $(STAMP) ## Build the Rust extension (release) into .venv
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/maturin develop --release --quiet

test: test-rust test-python test-cluster ## Run everything CI runs: Rust tests, Python tests, the Spark cluster test

test-rust: ## Rust core tests (no Python needed)
	cargo test --release --locked

test-python: build ## Python binding tests (all but the cluster test)
	$(VPY) -m pytest

# Starts a standalone Spark master and worker on 127.0.0.1 from the pyspark package; the executors
# run their own venv (target/cluster-venv) with the release wheel installed. Skipped, with the
# reason, where Java is missing.
test-cluster: build $(WHEEL_STAMP) ## Spark on a standalone cluster (127.0.0.1): generate + replay equal lc.replay; bounded worker memory
	LEDGERCACHE_WHEEL="$$(ls $(abspath $(WHEELS))/ledgercache-*.whl)" $(VPY) -m pytest -m cluster tests/python/test_spark_cluster.py

bench: build ## Benchmarks (Rust and Python, each beside its anchor), then the goals of issue 12 with this run's figures
	@mkdir -p target
	set -o pipefail; $(MAKE) --no-print-directory bench-all 2>&1 | tee target/bench.txt
	@echo
	@echo "Goals, each figure beside its anchor measured in this run (full output: target/bench.txt):"
	@grep -E "goal" target/bench.txt | grep -v "^cargo "

bench-all: build
	cargo bench --locked --features mimalloc --bench eviction > target/eviction.txt
	@cat target/eviction.txt
	@echo "The same with the system allocator (what a Rust program gets unless it picks one):"
	cargo bench --locked --bench eviction | sed -e "s/; goal <= [0-9.]*//" -e "s/; the owned line's goal, <= [0-9.]*, is [a-z]* it//"
	$(VPY) benches/eviction.py $$(grep -m1 'owned payloads' target/eviction.txt | sed 's/.*freed *\([0-9.]*\) ns.*/\1/')
	cargo bench --locked --features mimalloc --bench cursor_container --bench cache_ops --bench sorted_map
	$(VPY) benches/python_overhead.py
	$(VPY) benches/cursor_container.py
	$(VPY) benches/batch_insert.py
	cargo bench --locked --features mimalloc --bench ledger_reads > target/ledger_reads.txt
	@cat target/ledger_reads.txt
	$(VPY) benches/ledger_reads.py $$(sed -n 's/.*: \([0-9.]*\) M entries.*/\1/p' target/ledger_reads.txt)
	$(VPY) benches/replay_throughput.py
	$(VPY) benches/calibrate.py

lint: build ## ruff check/format, cargo fmt/clippy checks; the type stubs against the built extension (mypy stubtest)
	$(VENV)/bin/ruff check python tests benches
	$(VENV)/bin/ruff format --check python tests benches
	cargo fmt --check
	cargo clippy --all-targets --features python -- -D warnings
	$(VPY) -m mypy.stubtest --mypy-config-file pyproject.toml --allowlist tests/stubtest-allowlist.txt ledgercache

wheel: $(WHEEL_STAMP) ## Build the release wheel into target/wheels/ (manylinux_2_28, no debug info)

$(WHEEL_STAMP): $(STAMP) $(WHEEL_INPUTS)
	rm -rf $(WHEELS)
	PATH=$(abspath $(VENV))/bin:$$PATH XDG_CACHE_HOME=$(abspath target/cache) ZIG_GLOBAL_CACHE_DIR=$(abspath target/cache/zig) \
		$(VENV)/bin/maturin build --profile dist --zig --compatibility $(MANYLINUX) --locked --out $(WHEELS)
	touch $@

wheel-check: $(WHEEL_STAMP) ## Install the wheel into a bare venv (pip only), import it, replay, run the CLI
	rm -rf $(WHEEL_VENV)
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install --quiet --no-cache-dir $(WHEELS)/ledgercache-*.whl
	cd $(WHEEL_VENV) && env -u PYTHONPATH -u VIRTUAL_ENV bin/python -I $(abspath tests/wheel_check.py) \
		$(abspath $(WHEELS))/ledgercache-*.whl --manylinux $(MANYLINUX)

demo: build ## The main job: bundled scenarios x all strategies x 3 cache sizes on local Spark; report in demo-report/
	$(VENV)/bin/ledgercache demo -o demo-report

# The figures the pages quote are made here (docs/gen_figures.py replays two scenarios into
# target/docs-gen, which the pages include), so the site never quotes a number this build did not
# compute. --strict: a warning (a broken link, a missing include, a docstring mkdocstrings cannot
# read) fails the build.
docs: build ## The documentation site (MkDocs, Material) into target/site; open target/site/index.html
	$(VPY) docs/gen_figures.py target/docs-gen
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

clean: ## Remove build outputs and .venv
	cargo clean
	rm -rf $(VENV) python/ledgercache/_native*.so
