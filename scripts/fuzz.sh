#!/bin/sh
# Runs every libFuzzer target in fuzz/ for a bounded time, on the stable
# toolchain: scripts/fuzz.sh [SECONDS_PER_TARGET] (default 15; 14 targets,
# so about 3.5 minutes of fuzzing after the build).
#
# The targets are libfuzzer-sys binaries built with plain cargo and the
# coverage flags cargo-fuzz would pass for `--sanitizer none`, all stable
# (-Cpasses=sancov-module, -Cllvm-args=-sanitizer-coverage-*,
# -Cdebug-assertions, --cfg fuzzing): nothing to install, so a clean
# machine starts building at once. `--target` keeps the flags off build
# scripts and proc macros. FUZZ_SANITIZER=address adds AddressSanitizer,
# which needs -Zsanitizer=address, accepted on stable only with
# RUSTC_BOOTSTRAP=1 (set below for that case only). The code under test
# forbids unsafe, so the default run goes without it.
#
# Seeds are read from fuzz/corpus/<target>/ and never written to; what
# libFuzzer adds goes to fuzz/work/<target>/ (ignored by git). A crash or
# timeout leaves its input in fuzz/artifacts/<target>/ and fails the run.
# Reproduce one with: fuzz/target/x86_64-unknown-linux-gnu/release/<target> <file>
set -eu
cd "$(dirname "$0")/.."
seconds=${1:-15}
# A fixed seed makes a run repeat the last one's mutations (CI stays
# reproducible: a new crash is found by a developer, not by a submission's
# CI); FUZZ_SEED=0 lets libFuzzer pick one, to explore further.
seed=${FUZZ_SEED:-1}
sanitizer=${FUZZ_SANITIZER:-none}
triple=x86_64-unknown-linux-gnu
target_dir=$PWD/fuzz/target
flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
flags="$flags -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
flags="$flags -Cllvm-args=-sanitizer-coverage-pc-table"
flags="$flags -Cllvm-args=-sanitizer-coverage-trace-compares"
flags="$flags -Cllvm-args=-sanitizer-coverage-stack-depth"
flags="$flags --cfg fuzzing -Cdebug-assertions"
# 16 codegen units instead of cargo-fuzz's 1: a much faster build on 2
# cores for a few percent of speed.
flags="$flags -Ccodegen-units=16"
if [ "$sanitizer" != none ]; then
    export RUSTC_BOOTSTRAP=1 # -Zsanitizer on stable; see above
    flags="$flags -Zsanitizer=$sanitizer"
    target_dir=$PWD/fuzz/target/$sanitizer
fi

# One build of every target, in the fuzz crate's own target dir.
start=$(date +%s)
(cd fuzz && RUSTFLAGS="$flags" cargo build --quiet --release --bins \
    --target "$triple" --target-dir "$target_dir")
echo "built fuzz targets in $(($(date +%s) - start))s"

bin=$target_dir/$triple/release
failed=0
# The targets: every [[bin]] of fuzz/Cargo.toml.
for target in $(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^kubechain-fuzz$'); do
    work=fuzz/work/$target
    artifacts=fuzz/artifacts/$target
    log=fuzz/work/$target.log
    mkdir -p "$work" "$artifacts" "fuzz/corpus/$target"
    # -timeout: one input running 10 s is a hang; -max_len keeps inputs
    # small (the seeds are under 2 KiB); -rss_limit_mb bounds memory.
    status=0
    "$bin/$target" "$work" "fuzz/corpus/$target" \
        -max_total_time="$seconds" -seed="$seed" -timeout=10 -max_len=8192 -rss_limit_mb=2048 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1 || status=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    cov=$(sed -n 's/.* cov: \([0-9]*\) .*/\1/p' "$log" | tail -n 1)
    if [ "$status" -eq 0 ]; then
        printf '%-18s ok     %9s runs %7s exec/s  cov %s\n' "$target" "${runs:-?}" "${speed:-?}" "${cov:-?}"
    else
        failed=1
        found=$(ls -t "$artifacts" 2>/dev/null | head -n 1)
        printf '%-18s FAILED exit %s: %s (log %s)\n' "$target" "$status" "$artifacts/${found:-?}" "$log"
    fi
done
exit "$failed"
