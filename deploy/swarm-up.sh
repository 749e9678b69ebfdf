#!/bin/sh
# Deploys kubechain as a docker swarm stack (deploy/stack.yml), from a
# manager node, without any image registry on a one-node swarm:
#
#   1. builds the binaries and the images FROM scratch (deploy/images.sh);
#      with KUBECHAIN_REGISTRY=host:port/ it tags and pushes them there, which
#      a swarm of several nodes needs (each node pulls them from it),
#   2. writes the certificates with `kubechain certs` (kept across runs;
#      each service receives only its own key, as a swarm secret),
#   3. places the etcd members: labels nodes kubechain.etcd, kubechain.etcd2
#      and kubechain.etcd3 (round robin over the nodes) unless some node
#      already carries each label,
#   4. runs `docker stack deploy`, publishing the front door through the
#      routing mesh, or, on a kernel without IPVS (no mesh), on the
#      aggregator's node only (mode host, rolled stop-first),
#   5. waits for /readyz and writes the kubeconfig.
#
#   docker swarm init                       # once, if this node is in no swarm
#   deploy/swarm-up.sh
#   KUBECONFIG=deploy/swarm.kubeconfig kubectl get ns
#   docker service scale kubechain_core-server=5
#   deploy/swarm-down.sh -v                 # and the etcd volumes
#
# Settings (environment):
#   KUBECHAIN_SWARM_STACK        the stack's name (default kubechain)
#   KUBECHAIN_SWARM_PORT         the front door's published port (default 6443)
#   KUBECHAIN_SWARM_ADDRESS      the address clients reach it at, for the
#                                kubeconfig and the certificate (default 127.0.0.1)
#   KUBECHAIN_SWARM_HOSTS        more names or IPs the front door's certificate is for
#   KUBECHAIN_SWARM_KUBECONFIG   the kubeconfig written (default deploy/swarm.kubeconfig)
#   KUBECHAIN_SWARM_PUBLISH_MODE ingress (the routing mesh) or host; default:
#                                ingress where this kernel has IPVS
#   KUBECHAIN_SWARM_CORE_SERVERS, _EXTENSION_SERVERS, _AGGREGATORS  replicas (2 each)
#   KUBECHAIN_SWARM_TIMEOUT      seconds to wait for /readyz (default 180)
#   KUBECHAIN_PKI_DIR            certificates (default deploy/pki)
#   KUBECHAIN_IMAGE_TAG          tag of the images (default local)
#   KUBECHAIN_REGISTRY           push the images to this registry prefix (host:port/)
#   KUBECHAIN_PROFILE, KUBECHAIN_BIN_DIR  which binaries (see deploy/images.sh)
set -eu
. "$(dirname "$0")/swarm-env.sh"

state=$(docker info --format '{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}}')
if [ "$state" != "active true" ]; then
    echo "swarm-up: this node is not a swarm manager (docker swarm init)" >&2
    exit 1
fi
command -v curl >/dev/null 2>&1 || { echo "swarm-up: curl is needed to wait for readiness" >&2; exit 1; }

# 1. Binaries and images.
. "$deploy/images.sh"
resolve=never
if [ -n "${KUBECHAIN_REGISTRY:-}" ]; then
    for image in etcd aggregator core-server extension-server metrics-server cli; do
        docker tag "kubechain-$image:$KUBECHAIN_IMAGE_TAG" "${KUBECHAIN_REGISTRY}kubechain-$image:$KUBECHAIN_IMAGE_TAG"
        docker push --quiet "${KUBECHAIN_REGISTRY}kubechain-$image:$KUBECHAIN_IMAGE_TAG"
    done
    resolve=always
fi

# 2. Certificates: each server's names its service, each etcd member its own.
"$bin/kubechain" certs --dir "$KUBECHAIN_PKI_DIR" --etcd-members etcd,etcd2,etcd3 \
    --hosts "$KUBECHAIN_SWARM_ADDRESS${KUBECHAIN_SWARM_HOSTS:+,$KUBECHAIN_SWARM_HOSTS}" \
    --kubeconfig-server "https://$KUBECHAIN_SWARM_ADDRESS:$KUBECHAIN_SWARM_PORT" >/dev/null

# 3. etcd's members stay where their volumes are.
nodes=$(docker node ls --format '{{.ID}}')
count=$(echo "$nodes" | wc -l)
i=0
for member in etcd etcd2 etcd3; do
    labelled=$(docker node ls --filter "node.label=kubechain.$member=true" -q)
    if [ -z "$labelled" ]; then
        node=$(echo "$nodes" | sed -n "$((i % count + 1))p")
        docker node update --label-add "kubechain.$member=true" "$node" >/dev/null
        echo "swarm-up: etcd member $member placed on node $node"
    fi
    i=$((i + 1))
done

# 4. Deploy. The routing mesh needs IPVS in every node's kernel.
if [ -z "${KUBECHAIN_SWARM_PUBLISH_MODE:-}" ]; then
    if [ -e /proc/net/ip_vs ]; then
        KUBECHAIN_SWARM_PUBLISH_MODE=ingress
    else
        echo "swarm-up: this kernel has no IPVS, so no routing mesh: the front door is published on its node only" >&2
        KUBECHAIN_SWARM_PUBLISH_MODE=host
    fi
fi
if [ "$KUBECHAIN_SWARM_PUBLISH_MODE" = host ]; then
    # One aggregator per node at most (they share the node's port), each
    # stopped before its successor starts.
    export KUBECHAIN_SWARM_ENDPOINT_MODE=dnsrr KUBECHAIN_SWARM_UPDATE_ORDER=stop-first
    export KUBECHAIN_SWARM_AGGREGATORS="${KUBECHAIN_SWARM_AGGREGATORS:-$count}"
fi
export KUBECHAIN_SWARM_PUBLISH_MODE
echo "swarm-up: deploying stack $stack (front door: mode $KUBECHAIN_SWARM_PUBLISH_MODE, port $KUBECHAIN_SWARM_PORT)"
docker stack deploy --prune --resolve-image "$resolve" -c "$deploy/stack.yml" "$stack"

# 5. Ready.
deadline=$(($(date +%s) + ${KUBECHAIN_SWARM_TIMEOUT:-180}))
until curl -sf --max-time 5 --cacert "$KUBECHAIN_PKI_DIR/ca.crt" \
    "https://$KUBECHAIN_SWARM_ADDRESS:$KUBECHAIN_SWARM_PORT/readyz" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "swarm-up: the front door did not become ready; its tasks:" >&2
        docker stack ps --no-trunc "$stack" >&2 || true
        for service in aggregator core-server extension-server etcd; do
            docker service logs --tail 20 "${stack}_$service" >&2 2>&1 || true
        done
        exit 1
    fi
    sleep 2
done
mkdir -p "$(dirname "$kubeconfig")"
cp "$KUBECHAIN_PKI_DIR/kubeconfig" "$kubeconfig"
chmod 600 "$kubeconfig"
echo "swarm-up: ready: export KUBECONFIG=$kubeconfig"
