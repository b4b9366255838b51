#!/usr/bin/env bash
# Runs every fuzz target for a few seconds each, seeded with the repo's real fixtures.
# The random seed is fixed (KPACK_FUZZ_SEED, default 1) so a CI run explores the same inputs
# as the run that vetted it; pass another seed, or fuzz longer with cargo fuzz, to explore.
# cargo-fuzz needs nightly-only flags; RUSTC_BOOTSTRAP lets the stable toolchain accept them.
#
#   scripts/fuzz-smoke.sh [SECONDS_PER_TARGET]   build the targets, run each (default 15 s)
#   scripts/fuzz-smoke.sh --build                only build them (test.sh, ahead of the run)
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
SECONDS_PER_TARGET=${1:-15}
export RUSTC_BOOTSTRAP=1
# A smoke run is seconds long, so its targets are built at opt-level 1 unless told otherwise:
# on 2 cores the build took 144 s instead of 214 s at opt-level 3, and a target runs at about
# 70 % of opt-level 3's speed (elf: 100,899 runs in 10 s instead of 139,417). Fuzz longer with
# `cargo fuzz run` itself, at opt-level 3.
export CARGO_PROFILE_RELEASE_OPT_LEVEL=${CARGO_PROFILE_RELEASE_OPT_LEVEL:-1}
cargo fuzz build -O >/dev/null 2>&1 || cargo fuzz build -O
[ "$SECONDS_PER_TARGET" != --build ] || exit 0
# The tar reader's seeds: an artifact of the shard fixtures packed plain, zstd, xz and gzip.
mkdir -p corpus/tar
tar -C ../fixtures/shards/shard-a/demo_host_gfx90X -cf corpus/tar/seed.tar .
zstd -qf corpus/tar/seed.tar -o corpus/tar/seed.tar.zst
xz -kfq corpus/tar/seed.tar
gzip -kfnq corpus/tar/seed.tar
# The v2 reader's seeds: fixtures packed with scheme unified (delta frames across targets).
mkdir -p corpus/archive_v2
# KPACK_BIN: a kpack binary already built (test.sh passes the one its tests built).
kpack=${KPACK_BIN:-}
if [ -z "$kpack" ]; then
  # The workspace's own release profile, not the smoke build's opt-level.
  env -u CARGO_PROFILE_RELEASE_OPT_LEVEL \
    cargo build --release -q --manifest-path ../Cargo.toml -p kpack-cli --bin kpack
  kpack=../target/${CARGO_BUILD_TARGET:+$CARGO_BUILD_TARGET/}release/kpack
fi
for lib in libtwo.so librdc.so; do
  "$kpack" pack --compression unified "../fixtures/bin/$lib" -o "corpus/archive_v2/$lib.kpack" >/dev/null
done
# One target per core at a time (each libFuzzer run is single-threaded), each target's log
# kept apart and printed in target order; any failure fails the run, each one shown.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
run_target() {
  local target=$1 corpus="corpus/$1"
  mkdir -p "$corpus"
  cargo fuzz run -O "$target" "$corpus" ../fixtures/bin ../fixtures/modern ../fixtures/vectors \
    ../fixtures/wheels ../fixtures/offload ../fixtures/tarballs ../fixtures/platforms -- \
    -seed="${KPACK_FUZZ_SEED:-1}" -max_total_time="$SECONDS_PER_TARGET" -max_len=131072 \
    -rss_limit_mb=2048 >"$logs/$target.log" 2>&1 || touch "$logs/$target.failed"
}
export -f run_target
export SECONDS_PER_TARGET logs
cargo fuzz list | xargs -P "$(nproc)" -I{} bash -c 'run_target {}'
status=0
for target in $(cargo fuzz list); do
  if [ -e "$logs/$target.failed" ]; then
    echo "fuzz: $target failed:" >&2
    grep -v "^\s*\[[0-9]" "$logs/$target.log" | tail -n 40 >&2
    status=1
  else
    echo "fuzz: $target: $(grep -E '^Done' "$logs/$target.log" | tail -n 1)"
  fi
done
[ "$status" = 0 ] || exit 1
echo "fuzz smoke: every target ran ${SECONDS_PER_TARGET}s without a crash"
