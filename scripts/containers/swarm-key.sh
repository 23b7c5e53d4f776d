#!/usr/bin/env bash
# Make sure the Compose cluster has a private-network key: `make up` runs this first.
#   scripts/containers/swarm-key.sh [ENV_FILE]        (default: .env beside docker-compose.yml)
# - SWARM_KEY exported in the caller's environment: used as it is (Compose prefers it to .env);
# - a `SWARM_KEY=<64 hex>` line in ENV_FILE: kept;
# - a `SWARM_KEY=` line with no value: the user chose an open swarm; nothing is written;
# - no SWARM_KEY line: 32 random bytes are appended as `SWARM_KEY=<64 hex>` (ENV_FILE is created
#   with mode 0600 when missing; its other lines are left alone).
# The value is the key of a libp2p swarm.key ("/key/swarm/psk/1.0.0/\n/base16/\n<hex>"): a
# .env value is one line, so only the hex is stored. To give the same key to agents outside
# Compose:  printf '/key/swarm/psk/1.0.0/\n/base16/\n%s\n' "$SWARM_KEY" > swarm.key
# .env is in .gitignore and outside the image's build context (.dockerignore).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
env_file=${1:-$(cd "$here/../.." && pwd)/.env}
hex='^[0-9a-fA-F]{64}$'

if [ -n "${SWARM_KEY+x}" ]; then
  if [ -z "$SWARM_KEY" ]; then
    echo "swarm-key: SWARM_KEY is empty in the environment: an OPEN swarm (anyone who can reach an agent may join)"
  elif [[ "$SWARM_KEY" =~ $hex ]]; then
    echo "swarm-key: using SWARM_KEY from the environment"
  else
    echo "swarm-key: SWARM_KEY in the environment is not 64 hex characters" >&2; exit 1
  fi
  exit 0
fi

if [ -f "$env_file" ] && line=$(grep -E '^[[:space:]]*(export[[:space:]]+)?SWARM_KEY[[:space:]]*=' "$env_file" | tail -1); then
  value=${line#*=}
  value=${value//[[:space:]\"\']/}
  if [ -z "$value" ]; then
    echo "swarm-key: SWARM_KEY is empty in $env_file: an OPEN swarm (anyone who can reach an agent may join)"
  elif [[ "$value" =~ $hex ]]; then
    echo "swarm-key: using the SWARM_KEY in $env_file"
  else
    echo "swarm-key: SWARM_KEY in $env_file is not 64 hex characters; fix or delete that line" >&2; exit 1
  fi
  exit 0
fi

key=$(python3 -c 'import secrets; print(secrets.token_hex(32))' 2>/dev/null || openssl rand -hex 32)
[[ "$key" =~ $hex ]] || { echo "swarm-key: could not generate a key (need python3 or openssl)" >&2; exit 1; }
umask 077
if [ -s "$env_file" ] && [ -n "$(tail -c1 "$env_file")" ]; then
  echo >> "$env_file"  # the file did not end with a newline
fi
{
  echo "# libp2p private-network key of the Compose swarm (written by make up; keep it secret)"
  echo "SWARM_KEY=$key"
} >> "$env_file"
echo "swarm-key: wrote a new SWARM_KEY to $env_file"
