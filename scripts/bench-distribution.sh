#!/usr/bin/env bash
# The distribution benchmark in one command: builds kpack, fetches Debian's ROCm 7.2.4
# packages that carry device code as TheRock artifacts (scripts/fetch-distribution.sh), runs
# split, recombine, verify --original and split-wheel on all of them, each beside its floor
# measured in the same run (scripts/bench-distribution.py), prints the tables and writes them
# to docs/distribution.md.
#
#   scripts/bench-distribution.sh            the full run (about 6.6 GB of .debs fetched once
#                                            into $KPACK_DISTRO, default /var/tmp/kpack-distro)
#   scripts/bench-distribution.sh --slice    CI's slice: two packages scripts/setup.sh already
#                                            fetched, in $KPACK_DISTRO/slice; prints only
#
# Exits non-zero, naming the stage and package, when a stage's peak RSS exceeds 512 MiB, a
# verify fails or a kpack command fails. KPACK_BENCH_NOTE adds a line to the document.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIST=$(realpath -m "${KPACK_DISTRO:-/var/tmp/kpack-distro}")
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
# KPACK_BIN: a kpack binary already built (CI passes the one its tests built).
KPACK=${KPACK_BIN:-}
if [ -z "$KPACK" ]; then
  cargo build -q --release -p kpack-cli --manifest-path "$ROOT/Cargo.toml"
  KPACK="$TARGET/${CARGO_BUILD_TARGET:+$CARGO_BUILD_TARGET/}release/kpack"
fi
if [ "${1:-}" = --slice ]; then
  KPACK_DISTRO="$DIST/slice" "$ROOT/scripts/fetch-distribution.sh" --slice
  exec python3 "$ROOT/scripts/bench-distribution.py" --kpack "$KPACK" --dist "$DIST/slice" \
    --label "CI slice" --slice
fi
KPACK_DISTRO="$DIST" "$ROOT/scripts/fetch-distribution.sh"
exec python3 "$ROOT/scripts/bench-distribution.py" --kpack "$KPACK" --dist "$DIST" \
  --doc "$ROOT/docs/distribution.md" --note "${KPACK_BENCH_NOTE:-}"
