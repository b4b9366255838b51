#!/usr/bin/env bash
# The whole test suite: set-up, lint, unit and fixture tests, the real-world tier, the loom
# model, a fuzz smoke run and the benchmarks (which print figures, they do not assert them).
# Ends with one line counting every test that ran.
set -euo pipefail
cd "$(dirname "$0")/.."
export KPACK_CORPUS=${KPACK_CORPUS:-/var/tmp/kpack-corpus}
scripts/setup.sh

results=$(mktemp)
trap 'rm -f "$results"' EXIT
# Runs a test command, keeping its output for the closing count.
tests() { "$@" 2>&1 | tee -a "$results"; }

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# Fixture tier, then the real-world tier (tests marked #[ignore = "real-world"], they need
# the corpus fetched above). Release mode: the real-world inputs are 1.3 GB.
tests cargo test --workspace --release
tests cargo test --workspace --release -- --ignored
# Every interleaving of concurrent loads on one runtime cache (loom model).
tests cargo test -p kpack-runtime --features loom-model --release --test loom_cache

# --- Python package (issue 8) ---------------------------------------------------------------
# The wheel as users get it (manylinux_2_28, abi3), installed into a fresh venv, whose `kpack`
# command and package the pytest suite then exercise on the fixtures. pytest's exit status
# fails the run, 5 (no test collected) included.
PY_TOOLS=${KPACK_PY_TOOLS:-/var/tmp/kpack-pytools}
rm -f target/wheels/kpack-*.whl
PATH="$PY_TOOLS/bin:$PATH" maturin build --release --zig --compatibility manylinux_2_28
wheel=$(ls target/wheels/kpack-*.whl)
echo "wheel: $wheel"
pyenv_dir=$(mktemp -d)
trap 'rm -f "$results"; rm -rf "$pyenv_dir"' EXIT
python3 -m venv "$pyenv_dir/venv"
"$pyenv_dir/venv/bin/pip" install -q "$wheel" pytest==9.2.0
"$pyenv_dir/venv/bin/kpack" --version
"$pyenv_dir/venv/bin/python" -m pytest -p no:cacheprovider python/tests
# ----------------------------------------------------------------------------------------------

scripts/fuzz-smoke.sh "${KPACK_FUZZ_SECONDS:-15}"
cargo bench --workspace --benches --quiet

passed=$(sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' "$results" | awk '{s += $1} END {print s + 0}')
failed=$(sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' "$results" | awk '{s += $1} END {print s + 0}')
echo "kpack: $passed passed, $failed failed"
