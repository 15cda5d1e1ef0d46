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

.PHONY: help venv build test test-rust test-python bench lint wheel wheel-check demo clean

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

test: test-rust test-python ## Run everything CI runs: Rust tests, then Python tests

test-rust: ## Rust core tests (no Python needed)
	cargo test --release --locked

test-python: build ## Python binding tests
	$(VPY) -m pytest

bench: build ## Benchmarks: Rust harnesses, Python call overhead, Python vs Rust ledger reads
	cargo bench --locked --bench cursor_container --bench eviction --bench cache_ops --bench sorted_map
	$(VPY) benches/python_overhead.py
	cargo bench --locked --bench ledger_reads > target/ledger_reads.txt
	@cat target/ledger_reads.txt
	$(VPY) benches/ledger_reads.py $$(sed -n 's/.*: \([0-9.]*\) M entries.*/\1/p' target/ledger_reads.txt)
	$(VPY) benches/replay_throughput.py

lint: build ## cargo fmt/clippy checks; the type stubs against the built extension (mypy stubtest)
	cargo fmt --check
	cargo clippy --all-targets --features python -- -D warnings
	$(VPY) -m mypy.stubtest --mypy-config-file pyproject.toml --allowlist tests/stubtest-allowlist.txt ledgercache

wheel: $(STAMP) ## Build the release wheel into target/wheels/ (manylinux_2_28, no debug info)
	rm -rf $(WHEELS)
	PATH=$(abspath $(VENV))/bin:$$PATH XDG_CACHE_HOME=$(abspath target/cache) ZIG_GLOBAL_CACHE_DIR=$(abspath target/cache/zig) \
		$(VENV)/bin/maturin build --profile dist --zig --compatibility $(MANYLINUX) --locked --out $(WHEELS)

wheel-check: wheel ## Install the wheel into a bare venv (pip only), import it, replay, run the CLI
	rm -rf $(WHEEL_VENV)
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install --quiet --no-cache-dir $(WHEELS)/ledgercache-*.whl
	cd $(WHEEL_VENV) && env -u PYTHONPATH -u VIRTUAL_ENV bin/python -I $(abspath tests/wheel_check.py) \
		$(abspath $(WHEELS))/ledgercache-*.whl --manylinux $(MANYLINUX)

demo: build ## The main job: bundled scenarios x all strategies x 3 cache sizes on local Spark; report in demo-report/
	$(VENV)/bin/ledgercache demo -o demo-report

clean: ## Remove build outputs and .venv
	cargo clean
	rm -rf $(VENV) python/ledgercache/_native*.so
