#!/bin/sh
# Runs every test: unit tests, storage conformance against a real etcd, and
# the end-to-end tests that start real clusters and drive them with kubectl,
# etcdctl, curl and the Python kubernetes client.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh --test
# One build of everything; the e2e tests run the binaries it produces.
cargo build --workspace --all-targets --quiet
cargo test --workspace -- "$@"
