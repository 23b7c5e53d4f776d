#!/usr/bin/env bash
# Membership for the Compose cluster: `make up` runs this after building the image.
#   scripts/containers/credentials.sh ENV_FILE SWARM_DIR ENGINE IMAGE SCORERS EXECUTORS SWARM DAYS
# - SWARM_AUTHORITY in the environment, or a SWARM_AUTHORITY line in ENV_FILE, empty: no
#   authority (the swarm key alone, every key holder in every role): only the mount points;
# - otherwise the authority key SWARM_DIR/authority.key is made on first use (mode 600, kept by
#   whoever runs the cluster: never in an image or an agent's volume), its public id written
#   into ENV_FILE as SWARM_AUTHORITY, and a key and a credential issued per service slot into
#   SWARM_DIR/credentials/<service>/<slot>/ (kept while valid, renewed within 7 days of expiry):
#   decomposer-1..3, scorer/scorer-1..SCORERS, executor/executor-1..EXECUTORS,
#   observer/observer (observer, submitter: the web page's form), observer/submit (`make
#   submit`, data dir /tmp/submit) and observer/observe (`make observe`, /tmp/observe). Each service mounts its own directory read-only; a replica scaled beyond what was
#   issued waits until this runs again with the new scale.
# The signing runs in a throw-away container of IMAGE (no network) with SWARM_DIR mounted: the
# host needs no Python of the project.
set -euo pipefail
env_file=$1 dir=$2 engine=$3 image=$4 scorers=$5 executors=$6 swarm=$7 days=$8
mkdir -p "$dir" && chmod 700 "$dir"
groups="decomposer-1 decomposer-2 decomposer-3 scorer executor observer"
for g in $groups; do mkdir -p "$dir/credentials/$g"; done

authority=unset
if [ -n "${SWARM_AUTHORITY+x}" ]; then
  authority=$SWARM_AUTHORITY
elif [ -f "$env_file" ] && line=$(grep -E '^[[:space:]]*(export[[:space:]]+)?SWARM_AUTHORITY[[:space:]]*=' "$env_file" | tail -1); then
  authority=${line#*=}
  authority=${authority//[[:space:]\"\']/}
fi
if [ "$authority" != unset ] && [ -z "$authority" ]; then
  echo "credentials: SWARM_AUTHORITY is empty: no authority, the swarm key alone (any key holder may act in any role)"
  exit 0
fi

run() { "$engine" run --rm --network none --user 0 -v "$(cd "$dir" && pwd):/swarm" --entrypoint python "$image" -m agent "$@"; }
if [ ! -f "$dir/authority.key" ]; then
  if [ "$authority" != unset ]; then
    echo "credentials: SWARM_AUTHORITY=$authority is set but $dir/authority.key is missing: put the authority key there, or set SWARM_AUTHORITY= (empty) for no authority" >&2
    exit 1
  fi
  run keygen --authority --out /swarm/authority.key >/dev/null
  chmod 600 "$dir/authority.key"
fi
id=$(run keygen --show /swarm/authority.key)
if [ "$authority" = unset ]; then
  umask 077
  if [ -s "$env_file" ] && [ -n "$(tail -c1 "$env_file")" ]; then echo >> "$env_file"; fi
  { echo "# the swarm authority's public id (its key: $dir/authority.key; written by make up)"
    echo "SWARM_AUTHORITY=$id"; } >> "$env_file"
  echo "credentials: wrote SWARM_AUTHORITY=$id to $env_file"
elif [ "$authority" != "$id" ]; then
  echo "credentials: SWARM_AUTHORITY=$authority is not the id of $dir/authority.key ($id)" >&2
  exit 1
fi
slots=(--slot decomposer-1/decomposer-1=decomposer --slot decomposer-2/decomposer-2=decomposer
       --slot decomposer-3/decomposer-3=decomposer --slot observer/observer=observer,submitter
       --slot observer/submit=submitter --slot observer/observe=observer)
for i in $(seq 1 "$scorers"); do slots+=(--slot "scorer/scorer-$i=scorer"); done
for i in $(seq 1 "$executors"); do slots+=(--slot "executor/executor-$i=executor"); done
run credential slots --authority-key /swarm/authority.key --dir /swarm/credentials --swarm "$swarm" \
  --days "$days" "${slots[@]}" | sed 's/^/credentials: /'
