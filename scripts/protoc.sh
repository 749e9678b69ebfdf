#!/bin/sh
# A protoc for build scripts: runs protox, the pure-Rust protobuf compiler,
# building it into target/tools on first use.
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/target/tools/bin/protox"
if [ ! -x "$bin" ]; then
    # Serialise concurrent first uses; cargo install is not re-entrant.
    mkdir -p "$root/target"
    exec 9>"$root/target/tools.lock"
    flock 9
    [ -x "$bin" ] || env -u PROTOC -u CARGO_TARGET_DIR cargo install --quiet --locked protox --version 0.10.0 --features bin --root "$root/target/tools" --target-dir "$root/target/tools/build" >&2
fi
exec "$bin" "$@"
