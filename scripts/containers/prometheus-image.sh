#!/usr/bin/env bash
# Build localhost/swarm-prometheus (Debian's prometheus on localhost/bookworm-py); skipped when
# present (FORCE=1 rebuilds). Needs base-image.sh first.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
IMAGE=${PROMETHEUS_IMAGE:-localhost/swarm-prometheus:latest}
if [ "${FORCE:-}" != 1 ] && podman image exists "$IMAGE"; then
  echo "prometheus-image.sh: $IMAGE already present (FORCE=1 rebuilds)"; exit 0
fi
podman image exists localhost/bookworm-py || "$here/base-image.sh"
podman build --format docker -f "$here/prometheus.Dockerfile" -t "$IMAGE" "$here"
echo "prometheus-image.sh: $IMAGE $(podman run --rm --entrypoint /usr/bin/prometheus "$IMAGE" --version 2>&1 | head -1)"
