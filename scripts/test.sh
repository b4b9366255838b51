#!/usr/bin/env bash
# The whole test suite: set-up, lint, unit and fixture tests, the real-world tier,
# a fuzz smoke run and the benchmarks (which print figures, they do not assert them).
set -euo pipefail
cd "$(dirname "$0")/.."
export KPACK_CORPUS=${KPACK_CORPUS:-/var/tmp/kpack-corpus}
scripts/setup.sh

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# Fixture tier, then the real-world tier (tests marked #[ignore = "real-world"], they need
# the corpus fetched above). Release mode: the real-world inputs are 1.3 GB.
cargo test --workspace --release
cargo test --workspace --release -- --ignored
# Every interleaving of concurrent loads on one runtime cache (loom model).
cargo test -p kpack-runtime --features loom-model --release --test loom_cache
scripts/fuzz-smoke.sh "${KPACK_FUZZ_SECONDS:-15}"
cargo bench --workspace --quiet
