# Shared by compose-up.sh and compose-down.sh (sourced, not run): the
# settings of a compose deployment and the compose command to use.
#
#   KUBECHAIN_COMPOSE_PROJECT     compose project name (default kubechain); two
#                                 projects run side by side without clashing
#   KUBECHAIN_COMPOSE_PORT        host port of the front door (default 6443)
#   KUBECHAIN_COMPOSE_ADDRESS     host address it is published on (default 127.0.0.1)
#   KUBECHAIN_COMPOSE_KUBECONFIG  where the kubeconfig goes (default deploy/compose.kubeconfig)
#   KUBECHAIN_PKI_DIR             certificates (default deploy/pki)
#   KUBECHAIN_IMAGE_TAG           tag of the images built (default local)
#   KUBECHAIN_COMPOSE_HA=1        three etcd members (docker-compose.ha.yml); or pass --ha first
#   KUBECHAIN_NODE_NAME          the Node metrics-server measures (default kubechain-compose)
#   KUBECHAIN_AUDIT_POLICY        an audit policy file: the aggregator audits by it, into the
#                                 audit-log volume (docker-compose.audit.yml; KUBECHAIN_AUDIT_LOG_PATH=-
#                                 for its standard output)
# shellcheck shell=sh

deploy=$(cd "$(dirname "$0")" && pwd)
workspace=$(dirname "$deploy")

export COMPOSE_PROJECT_NAME="${KUBECHAIN_COMPOSE_PROJECT:-kubechain}"
export KUBECHAIN_COMPOSE_PORT="${KUBECHAIN_COMPOSE_PORT:-6443}"
export KUBECHAIN_COMPOSE_ADDRESS="${KUBECHAIN_COMPOSE_ADDRESS:-127.0.0.1}"
export KUBECHAIN_IMAGE_TAG="${KUBECHAIN_IMAGE_TAG:-local}"
KUBECHAIN_PKI_DIR="${KUBECHAIN_PKI_DIR:-$deploy/pki}"
mkdir -p "$KUBECHAIN_PKI_DIR" && chmod 700 "$KUBECHAIN_PKI_DIR"
KUBECHAIN_PKI_DIR=$(cd "$KUBECHAIN_PKI_DIR" && pwd)
export KUBECHAIN_PKI_DIR
kubeconfig="${KUBECHAIN_COMPOSE_KUBECONFIG:-$deploy/compose.kubeconfig}"

# docker compose v2 (the CLI plugin) when present, else docker-compose (v1.29
# from Debian, or a v2 standalone binary).
if docker compose version >/dev/null 2>&1; then
    compose_cmd="docker compose"
elif command -v docker-compose >/dev/null 2>&1; then
    compose_cmd="docker-compose"
else
    echo "neither 'docker compose' nor 'docker-compose' is installed (apt-get install docker-compose)" >&2
    exit 1
fi

compose_files="-f $deploy/docker-compose.yml"
if [ "${KUBECHAIN_COMPOSE_HA:-}" = 1 ]; then
    compose_files="$compose_files -f $deploy/docker-compose.ha.yml"
fi
# KUBECHAIN_AUDIT_POLICY=FILE: the aggregator audits by that policy (docker-compose.audit.yml).
if [ -n "${KUBECHAIN_AUDIT_POLICY:-}" ]; then
    KUBECHAIN_AUDIT_POLICY=$(cd "$(dirname "$KUBECHAIN_AUDIT_POLICY")" && pwd)/$(basename "$KUBECHAIN_AUDIT_POLICY")
    export KUBECHAIN_AUDIT_POLICY
    compose_files="$compose_files -f $deploy/docker-compose.audit.yml"
fi

# compose ARGS...: the compose command on this deployment's files.
compose() {
    # shellcheck disable=SC2086 # both are word lists on purpose
    $compose_cmd $compose_files "$@"
}
