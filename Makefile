# ledgercache: run `make help` for the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.deps-installed
export PYSPARK_PYTHON := $(abspath $(VPY))

.PHONY: help venv build test test-rust test-python bench lint demo clean

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

lint: $(STAMP) ## cargo fmt/clippy checks
	cargo fmt --check
	cargo clippy --all-targets --features python -- -D warnings

demo: build ## The main job: bundled scenarios x all strategies x 3 cache sizes on local Spark; report in demo-report/
	$(VENV)/bin/ledgercache demo -o demo-report

clean: ## Remove build outputs and .venv
	cargo clean
	rm -rf $(VENV) python/ledgercache/_native*.so
