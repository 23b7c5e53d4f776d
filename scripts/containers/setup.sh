#!/usr/bin/env bash
# Idempotent setup of a daemonless container engine on a Debian 12 host without Docker:
# podman & co and Debian's prometheus (for promtool) from apt, podman-compose into the
# project's venv, and a marker telling mk/cluster.mk to use scripts/containers/*.conf.
# Usage: scripts/containers/setup.sh        (root; about 10-60 s the first time, ~1 s after)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VENV=${VENV:-$root/.venv}
PODMAN_COMPOSE_VERSION=1.6.0
MARKER=${SWARM_PODMAN_MARKER:-/var/lib/swarm-planner/podman-local}

[ "$(id -u)" = 0 ] || { echo "setup.sh: run as root" >&2; exit 1; }

pkgs=(podman buildah slirp4netns fuse-overlayfs uidmap netavark aardvark-dns iptables
      debootstrap runc containernetworking-plugins
      golang-github-containernetworking-plugin-dnsname prometheus)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  # Debian's prometheus would start a server on :9090 from its postinst: forbid service starts
  # while installing (policy-rc.d exit 101 = action forbidden).
  own_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    own_policy=1
  fi
  trap '[ -n "$own_policy" ] && rm -f /usr/sbin/policy-rc.d' EXIT
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "setup.sh: apt packages already installed"
fi

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if "$VENV/bin/python" -m pip show podman-compose 2>/dev/null | grep -qx "Version: $PODMAN_COMPOSE_VERSION"; then
  echo "setup.sh: podman-compose $PODMAN_COMPOSE_VERSION already in $VENV"
else
  "$VENV/bin/python" -m pip install -q "podman-compose==$PODMAN_COMPOSE_VERSION"
fi

mkdir -p "$(dirname "$MARKER")"
echo "$here" > "$MARKER"

. "$here/env.sh"
echo "setup.sh: $(podman --version), podman-compose $("$VENV/bin/podman-compose" --version 2>/dev/null | awk '/podman-compose/{print $NF; exit}'), $(promtool --version 2>&1 | head -1)"
echo "setup.sh: the make targets (make up, make chaos, ...) use it as it is; to type podman or"
echo "setup.sh: podman-compose commands yourself:  . scripts/containers/env.sh; $VENV/bin/podman-compose -f docker-compose.yml -f compose.llm.yml -f scripts/containers/compose.podman.yml ..."
