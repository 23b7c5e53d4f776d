# The Compose cluster: included by the Makefile.
#   make up [SCALE_SCORERS=5] [SCALE_EXECUTORS=3] [OLLAMA_MODEL=llama3.2:1b]
#     (on first use writes a private-network key into .env: SWARM_KEY=<64 hex>; make swarm-key)
#   make submit GOAL="Plan a two-week trip to Japan"    make chaos [GOAL=...]
#   make logs [SERVICE=observer]   make observe   make ps   make kill SERVICE=decomposer-2
#   make down   make down DOWN_FLAGS=-v (also deletes the volumes)   make image
# `make up` remembers SCALE_SCORERS/SCALE_EXECUTORS (and LLM_MODEL) in the env file (.env), so plain compose
# commands later (`docker compose up -d --force-recreate`) and the next `make up` keep them.
#   make credentials (part of make up)   make revoke SLOT=scorer/scorer-3
#     (membership per role: an authority key in .swarm/, a key and credential per service slot)
# Uses `docker compose` when it works, else podman-compose (PATH or .venv). On a host prepared
# by scripts/containers/setup.sh (no registry: podman + a local base image), it adds
# compose.llm.yml (LLM=embedded) and scripts/containers/compose.podman.yml (no grafana, Debian
# Prometheus) and the engine settings of scripts/containers/; force either way with PODMAN_LOCAL=1 /
# PODMAN_LOCAL=.  make up LLM=embedded [LLM_MODEL=smollm2-135m]: the embedded model anywhere.

CLUSTER_ROOT := $(patsubst %/,%,$(dir $(abspath $(dir $(lastword $(MAKEFILE_LIST))))))
CTR_DIR := $(CLUSTER_ROOT)/scripts/containers

OLLAMA_MODEL ?= llama3.2:1b
SWARM_IMAGE ?= swarm-planner:latest
GOAL ?= Plan a two-week trip to Japan
# where Compose reads SWARM_KEY (and any other variable) from: beside docker-compose.yml
ENV_FILE ?= $(CLUSTER_ROOT)/.env
# the scale last given to `make up` (in ENV_FILE), else 3 scorers and 2 executors
env_value = $(shell sed -n 's/^[[:space:]]*$(1)[[:space:]]*=[[:space:]]*\([0-9][0-9]*\)[[:space:]]*$$/\1/p' $(ENV_FILE) 2>/dev/null | tail -1)
# ... and a name (a model's: letters, digits, . _ : -)
env_name = $(shell sed -n 's/^[[:space:]]*$(1)[[:space:]]*=[[:space:]]*\([A-Za-z0-9._:-][A-Za-z0-9._:-]*\)[[:space:]]*$$/\1/p' $(ENV_FILE) 2>/dev/null | tail -1)
SCALE_SCORERS ?= $(or $(call env_value,SCALE_SCORERS),3)
SCALE_EXECUTORS ?= $(or $(call env_value,SCALE_EXECUTORS),2)
SERVICE ?=
CHAOS_TIMEOUT ?= 1800
# the authority key and the slots' credentials (git-ignored, outside the build context)
SWARM_DIR ?= $(CLUSTER_ROOT)/.swarm
CREDENTIAL_DAYS ?= 30
SWARM_NAME ?= $(or $(SWARM_SWARM),compose)
SLOT ?=
export SCALE_SCORERS SCALE_EXECUTORS OLLAMA_MODEL SWARM_IMAGE SWARM_DIR

ifeq ($(origin COMPOSE),undefined)
COMPOSE := $(shell if docker compose version >/dev/null 2>&1; then echo docker compose; \
  elif command -v podman-compose >/dev/null 2>&1; then echo podman-compose; \
  elif [ -x "$(CLUSTER_ROOT)/.venv/bin/podman-compose" ]; then echo "$(CLUSTER_ROOT)/.venv/bin/podman-compose"; fi)
endif
ifeq ($(origin ENGINE),undefined)
ENGINE := $(shell if docker info >/dev/null 2>&1; then echo docker; elif command -v podman >/dev/null 2>&1; then echo podman; fi)
endif
ifeq ($(origin PODMAN_LOCAL),undefined)
PODMAN_LOCAL := $(if $(and $(findstring podman,$(COMPOSE)),$(wildcard /var/lib/swarm-planner/podman-local)),1,)
endif

COMPOSE_FILES := -f $(CLUSTER_ROOT)/docker-compose.yml
IMAGE_BUILD_FLAGS ?=
# the agents' LLM: ollama (default) or embedded (compose.llm.yml: one llama.cpp server from this
# image with LLM_MODEL built in); a podman host without a registry has no Ollama image
LLM ?= $(if $(filter 1,$(PODMAN_LOCAL)),embedded,ollama)
# remembered in the env file like the scale: what a plain compose command builds and serves
# (compose.llm.yml reads it there), so a later `make up` without it serves the same model
LLM_MODEL ?= $(or $(call env_name,LLM_MODEL),qwen2.5-1.5b)
export LLM_MODEL
ifeq ($(LLM),embedded)
COMPOSE_FILES += -f $(CLUSTER_ROOT)/compose.llm.yml
IMAGE_BUILD_FLAGS += --build-arg LLM_MODELS=$(LLM_MODEL)
endif
ifeq ($(PODMAN_LOCAL),1)
export CONTAINERS_CONF := $(CTR_DIR)/containers.conf
export CONTAINERS_REGISTRIES_CONF := $(CTR_DIR)/registries.conf
COMPOSE_FILES += -f $(CTR_DIR)/compose.podman.yml
# docker format keeps HEALTHCHECK/STOPSIGNAL; the host's CA bundle lets pip reach PyPI.
IMAGE_BUILD_FLAGS += --format docker -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/host-ca.crt:ro \
  --build-arg PIP_CERT=/etc/ssl/host-ca.crt
endif
# Compose reads $(CLUSTER_ROOT)/.env by itself; another ENV_FILE must be named
ENV_FILE_FLAG := $(if $(filter $(abspath $(ENV_FILE)),$(CLUSTER_ROOT)/.env),,--env-file $(ENV_FILE))
DC = $(COMPOSE) $(COMPOSE_FILES) $(ENV_FILE_FLAG)

.PHONY: up down logs ps submit observe chaos kill image cluster-check local-images swarm-key credentials revoke

cluster-check:
	@test -n "$(COMPOSE)" || { echo "need 'docker compose' or podman-compose (scripts/containers/setup.sh installs it)"; exit 1; }
	@test -n "$(ENGINE)" || { echo "need a container engine: docker or podman"; exit 1; }

# base image + Debian Prometheus image, only on a registry-less podman host (cached)
local-images:
ifeq ($(PODMAN_LOCAL),1)
	@$(CTR_DIR)/base-image.sh
	@$(CTR_DIR)/prometheus-image.sh
endif

image: cluster-check local-images
	cd $(CLUSTER_ROOT) && $(ENGINE) build $(IMAGE_BUILD_FLAGS) -t $(SWARM_IMAGE) .

# a libp2p private-network key in $(ENV_FILE) unless one is there (or SWARM_KEY is exported)
swarm-key:
	@$(CTR_DIR)/swarm-key.sh "$(ENV_FILE)"

# the authority key (made once, kept in $(SWARM_DIR)), its id in $(ENV_FILE), and a key and a
# credential for every slot of the current scale (a new replica's slot is issued here first)
credentials: image
	@$(CTR_DIR)/credentials.sh "$(ENV_FILE)" "$(SWARM_DIR)" "$(ENGINE)" "$(SWARM_IMAGE)" \
	  "$(SCALE_SCORERS)" "$(SCALE_EXECUTORS)" "$(SWARM_NAME)" "$(CREDENTIAL_DAYS)"

# the authority revokes one slot's member (published through the observer); `make up` then
# gives the slot a new key and its replica restarts with it
revoke: cluster-check
	@test -n "$(SLOT)" || { echo "usage: make revoke SLOT=<service>/<slot> (e.g. scorer/scorer-3; see $(SWARM_DIR)/credentials)"; exit 2; }
	@$(CTR_DIR)/revoke.sh "$(SWARM_DIR)" "$(ENGINE)" "$(SWARM_IMAGE)" "$(SLOT)" "$(DC)" "$(REASON)"

# What podman prints on a host without systemd (or syslog), per container, about healthchecks
# it cannot schedule: not a failure. Hidden from `make up`, and said once in words.
PODMAN_NOISE := -e "unable to get systemd connection to .* healthchecks" -e "^failed to connect to syslog"
PODMAN_NOTE := podman: no systemd here, so healthchecks are not scheduled (podman reports that as an error for every container: hidden). The agents retry peers and their LLM by themselves; podman healthcheck run CONTAINER runs one check by hand.

up: image swarm-key credentials
	@$(CTR_DIR)/env-set.sh "$(ENV_FILE)" SCALE_SCORERS=$(SCALE_SCORERS) SCALE_EXECUTORS=$(SCALE_EXECUTORS) $(if $(filter embedded,$(LLM)),LLM_MODEL=$(LLM_MODEL))
	@set -o pipefail; $(DC) up -d 2>&1 | { grep -v $(PODMAN_NOISE) || true; }
	@$(if $(findstring podman,$(COMPOSE)),echo "$(PODMAN_NOTE)",true)
	@echo "scorers=$(SCALE_SCORERS) executors=$(SCALE_EXECUTORS)$(if $(filter embedded,$(LLM)), embedded model=$(LLM_MODEL)) (kept in $(ENV_FILE) for later compose commands)"
	@# which LLM the agents run (SWARM_LLM may say scripted): read from an agent's own log, not from make's variables
	@python3 $(CLUSTER_ROOT)/mk/llm_in_use.py --compose "$(DC)"
	@echo "observer metrics: http://127.0.0.1:9101/metrics  Prometheus: http://127.0.0.1:9090"
	@$(if $(PODMAN_LOCAL),true,echo "Grafana: http://127.0.0.1:3000 (dashboard Swarm)")

# --remove-orphans: podman-compose's `down` otherwise removes only the replicas the current
# SCALE_* names (after `make up SCALE_SCORERS=5`, a plain `make down` left scorer 4 and 5, and
# so the network and volume, behind); with it, every container of the project goes.
# DOWN_FLAGS=-v also deletes the volumes: every agent's key and log (new identities next time).
down: cluster-check
	$(DC) down --remove-orphans $(DOWN_FLAGS)

logs: cluster-check
	$(DC) logs -f --tail=200 $(SERVICE)

ps: cluster-check
	$(DC) ps

# a second process inside the observer's container takes none of its ports (libp2p, metrics,
# the web page: mk/chaos.py's ONE_SHOT_ENV) and a data directory of its own, named like the
# credential slot it takes (observer/submit, observer/observe: scripts/containers/credentials.sh)
ONE_SHOT := -e SWARM_LISTEN_PORT=0 -e SWARM_METRICS_PORT=0 -e SWARM_WEB_PORT=0
# what a person reads at a terminal: readable warnings only (the compose environment's JSON info
# lines, about 20 per submit, would bury the goal's id and the live tree)
READABLE := -e SWARM_LOG_FORMAT=console -e SWARM_LOG_LEVEL=warning

submit: export GOAL := $(GOAL)
submit: cluster-check
	$(DC) exec -T $(ONE_SHOT) $(READABLE) -e SWARM_DATA_DIR=/tmp/submit observer python -m agent submit "$$GOAL"

# the live tree in your terminal: a second, throw-away observer inside the observer container
observe: cluster-check
	$(DC) exec $(ONE_SHOT) $(READABLE) -e SWARM_DATA_DIR=/tmp/observe observer python -m agent observe

# `docker compose kill decomposer-2`, on either engine
kill: cluster-check
	@test -n "$(SERVICE)" || { echo "name the service: make kill SERVICE=decomposer-2"; exit 1; }
	$(DC) kill $(SERVICE)

chaos: export GOAL := $(GOAL)
chaos: cluster-check
	python3 $(CLUSTER_ROOT)/mk/chaos.py --compose "$(DC)" --goal "$$GOAL" --timeout $(CHAOS_TIMEOUT)
