#!/bin/sh
# Runs every test: unit tests, storage conformance against a real etcd, the
# end-to-end tests that start real clusters and drive them with kubectl,
# etcdctl, curl and the Python kubernetes client, and then every fuzz target
# for a bounded time (scripts/fuzz.sh; FUZZ_SECONDS per target, 0 skips).
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh --test
# One build of everything; the e2e tests run the binaries it produces.
cargo build --workspace --all-targets --quiet
cargo test --workspace -- "$@"
seconds=${FUZZ_SECONDS:-8}
if [ "$seconds" -gt 0 ]; then
    scripts/fuzz.sh "$seconds"
fi
