#!/usr/bin/env bash
# `make revoke SLOT=scorer/scorer-3`: the authority revokes one slot's member.
#   scripts/containers/revoke.sh SWARM_DIR ENGINE IMAGE SLOT "DC" [REASON]
# 1. signs a revocation of the slot's peer id (in a throw-away container with SWARM_DIR: the
#    authority key stays on this host), kept in SWARM_DIR/revocations/;
# 2. publishes it through the running observer (`python -m agent publish -`): every agent folds
#    it and refuses whatever that peer stamps from now on, whatever order things arrive in;
# 3. moves the slot's key and credential to SWARM_DIR/revoked/: the next `make up` (or `make
#    credentials`) issues the slot a new key, and the replica holding the slot restarts with it.
set -euo pipefail
dir=$1 engine=$2 image=$3 slot=$4 dc=$5 reason=${6:-revoked by the operator}
cred="$dir/credentials/$slot/credential.json"
[ -f "$cred" ] || { echo "revoke: no credential at $cred (slots: $(cd "$dir/credentials" 2>/dev/null && ls -d */* | tr '\n' ' '))" >&2; exit 2; }
mkdir -p "$dir/revocations" "$dir/revoked"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
name="$stamp-${slot//\//-}"
"$engine" run --rm --network none --user 0 -v "$(cd "$dir" && pwd):/swarm" --entrypoint python "$image" \
  -m agent revoke --authority-key /swarm/authority.key --credential "/swarm/credentials/$slot/credential.json" \
  --reason "$reason" --out "/swarm/revocations/$name.json"
$dc exec -T -e SWARM_LISTEN_PORT=0 -e SWARM_METRICS_PORT=0 -e SWARM_DATA_DIR=/tmp/swarm-revoke \
  observer python -m agent publish - < "$dir/revocations/$name.json"
mv "$dir/credentials/$slot" "$dir/revoked/$name"
echo "revoke: $slot revoked ($dir/revocations/$name.json); run 'make up' (or 'make credentials') to give the slot a new key"
