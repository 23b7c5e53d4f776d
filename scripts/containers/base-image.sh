#!/usr/bin/env bash
# Build a Debian bookworm base image with Python 3.11 without any registry, and tag it as the
# Dockerfile's base so the unchanged `FROM python:3.11-slim` builds under podman here.
#   debootstrap --variant=minbase (python3 python3-venv python3-pip ca-certificates), from the
#   Debian mirror of this host's apt sources -> podman import localhost/bookworm-py
#   -> tag docker.io/library/python:3.11-slim
# Cached: the rootfs tarball is kept in $SWARM_IMAGE_CACHE (default /var/cache/swarm-planner),
# and nothing is done when the image already exists. FORCE=1 rebuilds both.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
CACHE=${SWARM_IMAGE_CACHE:-/var/cache/swarm-planner}
IMAGE=localhost/bookworm-py
ALIAS=docker.io/library/python:3.11-slim
TARBALL=$CACHE/bookworm-py.tar
SUITE=bookworm

[ "$(id -u)" = 0 ] || { echo "base-image.sh: run as root" >&2; exit 1; }

mirror() {  # the first Debian mirror serving $SUITE in this host's apt sources
  local m
  m=$(awk -v s="$SUITE" '
        FNR==1 {uri=""; suites=""}
        /^URIs:/ {uri=$2} /^Suites:/ {suites=$0}
        /^$/ {if (uri!="" && suites ~ (" " s "( |$)")) {print uri; exit} uri=""; suites=""}
        END {if (uri!="" && suites ~ (" " s "( |$)")) print uri}' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
    m=$(awk -v s="$SUITE" '$1=="deb" && $3==s {print $2; exit}' /etc/apt/sources.list)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}

if [ "${FORCE:-}" = 1 ]; then
  rm -f "$TARBALL"; podman rmi -f "$ALIAS" "$IMAGE" >/dev/null 2>&1 || true
fi

if podman image exists "$IMAGE"; then
  echo "base-image.sh: $IMAGE already present (FORCE=1 rebuilds)"
else
  if [ ! -s "$TARBALL" ]; then
    mkdir -p "$CACHE"
    rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    trap 'rm -rf "$rootfs" "$TARBALL.tmp"' EXIT
    m=$(mirror)
    echo "base-image.sh: debootstrap $SUITE from $m"
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
      "$SUITE" "$rootfs" "$m" > "$CACHE/debootstrap.log" 2>&1 \
      || { tail -30 "$CACHE/debootstrap.log" >&2; exit 1; }
    printf 'deb %s %s main\ndeb %s %s-updates main\n' "$m" "$SUITE" "$m" "$SUITE" > "$rootfs/etc/apt/sources.list"
    chroot "$rootfs" apt-get clean
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/* \
           "$rootfs"/tmp/* "$rootfs"/root/.cache
    tar --numeric-owner -C "$rootfs" -cf "$TARBALL.tmp" .
    mv "$TARBALL.tmp" "$TARBALL"
  else
    echo "base-image.sh: using cached rootfs $TARBALL"
  fi
  podman import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' "$TARBALL" "$IMAGE" >/dev/null
fi
podman tag "$IMAGE" "$ALIAS"
echo "base-image.sh: $IMAGE = $ALIAS ($(podman image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%d MB", $1/1e6}'))"
