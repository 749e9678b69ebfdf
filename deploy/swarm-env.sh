# Shared by swarm-up.sh and swarm-down.sh (sourced, not run): the settings
# of a swarm deployment (listed in swarm-up.sh).
# shellcheck shell=sh

deploy=$(cd "$(dirname "$0")" && pwd)
workspace=$(dirname "$deploy")

stack="${KUBECHAIN_SWARM_STACK:-kubechain}"
export KUBECHAIN_SWARM_PORT="${KUBECHAIN_SWARM_PORT:-6443}"
KUBECHAIN_SWARM_ADDRESS="${KUBECHAIN_SWARM_ADDRESS:-127.0.0.1}"
export KUBECHAIN_IMAGE_TAG="${KUBECHAIN_IMAGE_TAG:-local}"
KUBECHAIN_PKI_DIR="${KUBECHAIN_PKI_DIR:-$deploy/pki}"
mkdir -p "$KUBECHAIN_PKI_DIR" && chmod 700 "$KUBECHAIN_PKI_DIR"
KUBECHAIN_PKI_DIR=$(cd "$KUBECHAIN_PKI_DIR" && pwd)
export KUBECHAIN_PKI_DIR
kubeconfig="${KUBECHAIN_SWARM_KUBECONFIG:-$deploy/swarm.kubeconfig}"
