#!/bin/sh
# Brings kubechain up with docker-compose, without any image registry:
#
#   1. builds the binaries (release; KUBECHAIN_PROFILE=debug for debug builds;
#      KUBECHAIN_BIN_DIR=DIR to use binaries already built there),
#   2. stages a root filesystem per image (the binary, the libraries ldd lists,
#      the loader; etcd from Debian's etcd-server the same way) and builds each
#      image FROM scratch,
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

# 1. Binaries.
profile="${KUBECHAIN_PROFILE:-release}"
if [ -n "${KUBECHAIN_BIN_DIR:-}" ]; then
    bin="$KUBECHAIN_BIN_DIR"
else
    target="${CARGO_TARGET_DIR:-$workspace/target}"
    echo "compose-up: building the binaries ($profile)..."
    case "$profile" in
        debug | dev) cargo build --quiet --workspace --bins && bin="$target/debug" ;;
        *) cargo build --profile "$profile" --quiet --workspace --bins && bin="$target/$profile" ;;
    esac
fi
if ! command -v etcd >/dev/null 2>&1 || ! command -v etcdctl >/dev/null 2>&1; then
    "$workspace/scripts/deps.sh" # Debian's etcd-server and etcd-client: the etcd image
fi
command -v curl >/dev/null 2>&1 || { echo "compose-up: curl is needed to wait for readiness" >&2; exit 1; }

# 2. Root filesystems and images.
stage=$(mktemp -d "${TMPDIR:-/tmp}/kubechain-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
trap 'exit 130' INT TERM
if ! docker buildx version >/dev/null 2>&1; then
    export DOCKER_BUILDKIT=0 # the classic builder; BuildKit needs the buildx plugin
fi

# stage_rootfs NAME PROGRAM [EXTRA_PROGRAM...]: a root filesystem whose
# /entrypoint is PROGRAM.
stage_rootfs() {
    name=$1
    shift
    root="$stage/$name/rootfs"
    mkdir -p "$root/usr/local/bin" "$root/tmp"
    chmod 1777 "$root/tmp"
    for program in "$@"; do
        cp -L "$program" "$root/usr/local/bin/"
        # Every library the loader would map (and the loader itself), at the
        # same path; `ldd` fails on a static binary, which needs none.
        for lib in $(ldd "$program" 2>/dev/null | grep -o '/[^ ]*' || true); do
            cp -L --parents "$lib" "$root/"
        done
    done
    ln -s "/usr/local/bin/$(basename "$1")" "$root/entrypoint"
}

build_image() {
    name=$1
    shift
    stage_rootfs "$name" "$@"
    if ! out=$(docker build --quiet --pull=false -f "$deploy/Dockerfile" --build-arg COMPONENT="$name" \
        -t "kubechain-$name:$KUBECHAIN_IMAGE_TAG" "$stage/$name" 2>&1); then
        echo "$out" >&2
        exit 1
    fi
    echo "compose-up: image kubechain-$name:$KUBECHAIN_IMAGE_TAG"
}

build_image etcd "$(command -v etcd)" "$(command -v etcdctl)"
for component in aggregator core-server extension-server metrics-server; do
    build_image "$component" "$bin/$component"
done

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
