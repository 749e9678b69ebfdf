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
# cargo-nextest (on this project's machines) runs every test in one pool,
# as .config/nextest.toml says (3 at a time, the serial groups, the longest
# first); it does not run doc tests, so they follow. Without it, cargo test
# runs the binaries one after another.
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace -- "$@"
    cargo test --workspace --doc --quiet -- "$@"
else
    cargo test --workspace -- "$@"
fi
seconds=${FUZZ_SECONDS:-8}
if [ "$seconds" -gt 0 ]; then
    scripts/fuzz.sh "$seconds"
fi
