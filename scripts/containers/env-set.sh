#!/usr/bin/env bash
# Remember settings for later Compose commands: set NAME=VALUE lines in a Compose env file.
#   scripts/containers/env-set.sh ENV_FILE NAME=VALUE...
# `make up SCALE_SCORERS=5` runs this, so a plain `docker compose up -d --force-recreate` (or
# podman-compose's) afterwards reads SCALE_SCORERS=5 from .env and keeps 5 scorers, and a later
# `make up` keeps them too. An existing NAME= line is replaced, others are left alone; the file
# is created with mode 0600 (it also holds the SWARM_KEY).
set -euo pipefail
env_file=$1; shift
umask 077
touch "$env_file"
for pair in "$@"; do
  name=${pair%%=*}
  [[ "$name" =~ ^[A-Z_][A-Z0-9_]*$ ]] || { echo "env-set: bad name in '$pair'" >&2; exit 1; }
  tmp=$(mktemp "$env_file.XXXXXX")
  grep -vE "^[[:space:]]*(export[[:space:]]+)?$name[[:space:]]*=" "$env_file" > "$tmp" || true
  if [ -s "$tmp" ] && [ -n "$(tail -c1 "$tmp")" ]; then echo >> "$tmp"; fi
  echo "$pair" >> "$tmp"
  chmod 600 "$tmp"
  mv "$tmp" "$env_file"
done
