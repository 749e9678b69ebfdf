#!/bin/sh
# Removes a stack deployed by swarm-up.sh (same settings, same stack name)
# and waits until its tasks and network are gone:
#
#   deploy/swarm-down.sh            # services, secrets, network; etcd data kept
#   deploy/swarm-down.sh -v         # and the etcd volumes (of this node)
#   deploy/swarm-down.sh -v --rmi   # and the images (of this node)
set -eu
. "$(dirname "$0")/swarm-env.sh"
volumes="" images=""
for arg in "$@"; do
    case "$arg" in
        -v | --volumes) volumes=1 ;;
        --rmi) images=1 ;;
        *) echo "swarm-down: unknown argument $arg" >&2; exit 2 ;;
    esac
done
docker stack rm "$stack" >/dev/null 2>&1 || true
label="com.docker.stack.namespace=$stack"
deadline=$(($(date +%s) + 60))
while [ -n "$(docker ps -aq --filter "label=$label")$(docker network ls -q --filter "label=$label")" ]; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
        echo "swarm-down: the stack's containers or network are still there" >&2
        exit 1
    fi
    sleep 1
done
if [ -n "$volumes" ]; then
    for volume in $(docker volume ls -q --filter "label=$label"); do
        docker volume rm "$volume" >/dev/null
    done
fi
if [ -n "$images" ]; then
    for image in etcd aggregator core-server extension-server metrics-server cli; do
        docker image rm -f "${KUBECHAIN_REGISTRY:-}kubechain-$image:$KUBECHAIN_IMAGE_TAG" >/dev/null 2>&1 || true
    done
fi
echo "swarm-down: stack $stack removed"
