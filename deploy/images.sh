#!/bin/sh
# Builds kubechain's images without any image registry: run on its own
# (`deploy/images.sh`, e.g. for the Kubernetes manifests), or sourced by
# compose-up.sh and swarm-up.sh:
#
#   1. builds the binaries (release; KUBECHAIN_PROFILE=debug for debug builds;
#      KUBECHAIN_BIN_DIR=DIR to use binaries already built there),
#   2. stages a root filesystem per image (the binary, the libraries ldd lists,
#      the loader; etcd from Debian's etcd-server the same way) and builds each
#      image FROM scratch with deploy/Dockerfile:
#      kubechain-{etcd,aggregator,core-server,extension-server,metrics-server,cli}:$KUBECHAIN_IMAGE_TAG
#      (cli: the kubechain launcher, for `kubechain addons`).
#
# Sets $bin to the directory of the binaries.
# shellcheck shell=sh

if [ -z "${deploy:-}" ]; then
    set -eu
    deploy=$(cd "$(dirname "$0")" && pwd)
    workspace=$(dirname "$deploy")
    KUBECHAIN_IMAGE_TAG="${KUBECHAIN_IMAGE_TAG:-local}"
fi

profile="${KUBECHAIN_PROFILE:-release}"
if [ -n "${KUBECHAIN_BIN_DIR:-}" ]; then
    bin="$KUBECHAIN_BIN_DIR"
else
    target="${CARGO_TARGET_DIR:-$workspace/target}"
    echo "images: building the binaries ($profile)..."
    case "$profile" in
        debug | dev) (cd "$workspace" && cargo build --quiet --workspace --bins) && bin="$target/debug" ;;
        *) (cd "$workspace" && cargo build --profile "$profile" --quiet --workspace --bins) && bin="$target/$profile" ;;
    esac
fi
if ! command -v etcd >/dev/null 2>&1 || ! command -v etcdctl >/dev/null 2>&1; then
    "$workspace/scripts/deps.sh" # Debian's etcd-server and etcd-client: the etcd image
fi

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

# build_image NAME PROGRAM [EXTRA_PROGRAM...]: the image kubechain-NAME.
build_image() {
    name=$1
    shift
    stage_rootfs "$name" "$@"
    if ! out=$(docker build --quiet --pull=false -f "$deploy/Dockerfile" --build-arg COMPONENT="$name" \
        -t "kubechain-$name:$KUBECHAIN_IMAGE_TAG" "$stage/$name" 2>&1); then
        echo "$out" >&2
        exit 1
    fi
    echo "images: kubechain-$name:$KUBECHAIN_IMAGE_TAG"
}

build_image etcd "$(command -v etcd)" "$(command -v etcdctl)"
for component in aggregator core-server extension-server metrics-server; do
    build_image "$component" "$bin/$component"
done
build_image cli "$bin/kubechain"
rm -rf "$stage"
