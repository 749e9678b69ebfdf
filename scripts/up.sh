#!/bin/sh
# Starts a local kubechain cluster on a fresh machine: installs etcd if it is
# missing, builds kubechain, and runs `kubechain up` in the foreground.
# Arguments go to `kubechain up` (e.g. --port 7443 --data-dir /tmp/kc).
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo build --release --quiet --bins
exec target/release/kubechain up "$@"
