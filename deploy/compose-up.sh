#!/bin/sh
# Brings kubechain up with docker-compose, without any image registry:
#
#   1. builds the binaries (release; KUBECHAIN_PROFILE=debug for debug builds;
#      KUBECHAIN_BIN_DIR=DIR to use binaries already built there),
#   2. builds each image FROM scratch from them (deploy/images.sh),
#   3. writes the certificates with `kubechain certs` (kept across runs;
#      each container mounts only its own key and the CA certificates it uses),
#   4. runs `docker-compose up -d` with this script's arguments,
#   5. waits for /readyz and writes the kubeconfig.
#
#   deploy/compose-up.sh                          # one of each
#   deploy/compose-up.sh --scale core-server=3    # any `up` arguments
#   deploy/compose-up.sh --ha                     # three etcd members
#   KUBECONFIG=deploy/compose.kubeconfig kubectl get ns
#
# Settings (project name, port, ...) are listed in deploy/compose-env.sh.
set -eu
if [ "${1:-}" = "--ha" ]; then
    KUBECHAIN_COMPOSE_HA=1
    shift
fi
. "$(dirname "$0")/compose-env.sh"
cd "$workspace"

# 1 and 2. Binaries and images.
. "$deploy/images.sh"
command -v curl >/dev/null 2>&1 || { echo "compose-up: curl is needed to wait for readiness" >&2; exit 1; }

# 3. Certificates: each server's names its compose service, each etcd
# member (those of the --ha variant too) its own. They stay on the host:
# the compose files mount into each container only the files it uses.
"$bin/kubechain" certs --dir "$KUBECHAIN_PKI_DIR" --etcd-members etcd,etcd2,etcd3 \
    --kubeconfig-server "https://127.0.0.1:$KUBECHAIN_COMPOSE_PORT" >/dev/null

# 4. Up.
echo "compose-up: starting project $COMPOSE_PROJECT_NAME with $compose_cmd"
compose up -d "$@"

# 5. Ready.
deadline=$(($(date +%s) + ${KUBECHAIN_COMPOSE_TIMEOUT:-120}))
until curl -sf --max-time 5 --cacert "$KUBECHAIN_PKI_DIR/ca.crt" \
    "https://127.0.0.1:$KUBECHAIN_COMPOSE_PORT/readyz" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "compose-up: the front door did not become ready; recent logs:" >&2
        compose logs --tail 30 >&2 || true
        exit 1
    fi
    sleep 1
done
# metrics-server's replicas by container address, and the Node they measure.
metrics=""
for container in $(compose ps -q metrics-server); do
    ip=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$container")
    metrics="${metrics:+$metrics,}$ip:4443"
done
if [ -n "$metrics" ]; then
    "$bin/kubechain" addons --pki "$KUBECHAIN_PKI_DIR" --server "https://127.0.0.1:$KUBECHAIN_COMPOSE_PORT" \
        --node "${KUBECHAIN_NODE_NAME:-kubechain-compose}" --metrics "$metrics" >/dev/null
fi
mkdir -p "$(dirname "$kubeconfig")"
cp "$KUBECHAIN_PKI_DIR/kubeconfig" "$kubeconfig"
chmod 600 "$kubeconfig"
echo "compose-up: ready: export KUBECONFIG=$kubeconfig"
