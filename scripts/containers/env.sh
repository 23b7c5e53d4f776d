# Source me: points podman (and podman-compose) at this project's engine settings.
#   . scripts/containers/env.sh
_swarm_ctr_dir=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
export CONTAINERS_CONF="$_swarm_ctr_dir/containers.conf"
export CONTAINERS_REGISTRIES_CONF="$_swarm_ctr_dir/registries.conf"
unset _swarm_ctr_dir
