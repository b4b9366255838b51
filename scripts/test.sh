#!/usr/bin/env bash
# The whole test suite: set-up, lint, the unused-dependency check, unit and fixture tests, the
# real-world tier, the loom model, the Python package, a fuzz smoke run, the Windows stage
# (under wine) and the benchmarks (which print figures, they do not assert them). Ends with
# the time of each stage and one line counting every test that ran.
set -euo pipefail
cd "$(dirname "$0")/.."
export KPACK_CORPUS=${KPACK_CORPUS:-/var/tmp/kpack-corpus}
# One target directory for the tests and the benches, which share every crate they have in
# common, and one of its own for the wheel (target/wheel): maturin links through zig, and
# cargo's fingerprint includes the linker, so in a shared directory the wheel's build
# recompiled 82 crates and the next bench build recompiled 88 of them back. Every cargo
# command names the host triple explicitly, as maturin does (the scripts below find the
# kpack binary under target/<triple>/).
CARGO_BUILD_TARGET=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_BUILD_TARGET
# No debug info in these builds: the release profile keeps it for profiling by hand, which
# nothing here does (a panic's message names its file and line without it), and generating
# and linking it is a large part of compiling the tests, the benches, the wheel and the fuzz
# targets. Every cargo command below sees the same setting, so they share what they build.
export CARGO_PROFILE_RELEASE_DEBUG=0

results=$(mktemp)
stages=$(mktemp)
setup_log=$(mktemp)
pyenv_dir=
setup_pid=
# The time of each stage, printed at the end whether the run passes or fails.
print_stages() {
  [ -z "$setup_pid" ] || kill "$setup_pid" 2>/dev/null || true
  echo "stage times (wall seconds):"
  cat "$stages"
  rm -f "$results" "$stages" "$setup_log" "$tools_ready"
  [ -z "$pyenv_dir" ] || rm -rf "$pyenv_dir"
}
trap print_stages EXIT
# Runs a stage named $1: the command that follows, timed.
stage() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  printf '  %-28s %6d\n' "$name" $((SECONDS - start)) >>"$stages"
}

# The set-up (apt packages, the corpus, cargo's tools) is mostly downloads, so it runs in the
# background while the workspace is checked and compiled, and the stages that need it wait
# for it: on a fresh machine that overlaps minutes of network with minutes of CPU. Only a
# machine without a C compiler (the build needs one) waits for it first.
command -v cc >/dev/null 2>&1 || stage "set-up (for a C compiler)" scripts/setup.sh
tools_ready=$(mktemp -u)
(
  start=$SECONDS
  KPACK_SETUP_TOOLS_READY=$tools_ready scripts/setup.sh
  printf '  %-28s %6d\n' "set-up (in the background)" $((SECONDS - start)) >>"$stages"
) >"$setup_log" 2>&1 &
setup_pid=$!
# Waits for the set-up's build tools (cargo-fuzz, maturin, zig), or for the set-up to end.
build_tools() {
  while [ ! -e "$tools_ready" ] && kill -0 "$setup_pid" 2>/dev/null; do sleep 1; done
  [ -e "$tools_ready" ] || set_up
}
# Waits for the set-up and prints what it printed.
set_up() {
  local status=0
  wait "$setup_pid" || status=$?
  setup_pid=
  cat "$setup_log"
  return "$status"
}
stage "fmt" cargo fmt --all -- --check
stage "clippy" cargo clippy --workspace --all-targets --quiet -- -D warnings
# The archive reader as librocm_kpack links it: kpack-archive without its `write` feature;
# and the ELF and PE readers without their `rewrite` feature.
stage "clippy, reader only" cargo clippy -p kpack-archive -p kpack-elf -p kpack-pe --no-default-features --lib --quiet -- -D warnings
stage "build tests" cargo test --workspace --release --no-run --quiet
# Everything else that compiles, while the set-up may still be downloading: the benches (as
# scripts/bench.sh builds them) and the loom model (as run below), then, once the set-up has
# installed their tools, the wheel and the fuzz targets. On a fresh machine the set-up took
# about 11.5 minutes, longer than the checks and the test build: these builds fill that time
# instead of running after it.
stage "build benches" cargo bench --workspace --benches --no-run --quiet
stage "build loom model" cargo test -p kpack-runtime --features loom-model --release --test loom_cache --no-run --quiet
stage "waiting for the build tools" build_tools
PY_TOOLS=${KPACK_PY_TOOLS:-/var/tmp/kpack-pytools}
# The wheel as users get it (manylinux_2_28, abi3: the kpack binary, then the module); it is
# installed and tested below.
stage "python wheel" env KPACK_PY_TOOLS="$PY_TOOLS" scripts/wheel.sh
stage "build fuzz targets" scripts/fuzz-smoke.sh --build
stage "waiting for the set-up" set_up
# Every dependency a crate declares is used (the layering itself is a test of kpack-testkit).
stage "unused dependencies" cargo machete
# The kpack the tests built: the scripts below run it rather than build it again with other
# features.
export KPACK_BIN=$PWD/target/$CARGO_BUILD_TARGET/release/kpack
# Runs stages at once: `name function` pairs, each timed as a stage of its own, its output
# kept apart and printed whole, in the order given, once every one has ended (and kept for the
# closing count); fails if any failed. The functions run in subshells, where `set -e` does
# not apply: each chains its commands with `&&`.
at_once() {
  local dir i=0 n start=$SECONDS status=0
  dir=$(mktemp -d)
  local -a names=() pids=()
  while [ $# -gt 0 ]; do
    names+=("$1")
    (
      begun=$SECONDS
      "$2" && echo 0 >"$dir/$i.status" || echo 1 >"$dir/$i.status"
      echo $((SECONDS - begun)) >"$dir/$i.time"
      echo "$1: ended after $((SECONDS - begun)) s (its output follows when all have)" >&3
    ) 3>&1 >"$dir/$i.log" 2>&1 &
    pids+=($!)
    i=$((i + 1))
    shift 2
  done
  wait "${pids[@]}" || true
  for n in "${!names[@]}"; do
    tee -a "$results" <"$dir/$n.log"
    printf '  %-28s %6d\n' "${names[$n]} (at once)" "$(cat "$dir/$n.time")" >>"$stages"
    [ "$(cat "$dir/$n.status")" = 0 ] || { echo "${names[$n]} failed" >&2; status=1; }
  done
  rm -rf "$dir"
  printf '  %-28s %6d\n' "(the above, at once)" $((SECONDS - start)) >>"$stages"
  return "$status"
}
# What runs now is untimed and runs at once (`at_once`): run one after the other, the fixture
# and the real-world tiers kept one of CI's two cores idle for a sixth of their time (a few
# long tests of one binary outlast the rest), which the others fill.
# - The fixture tier: the tests not marked #[ignore].
fixture_tests() { cargo test --workspace --release; }
# - The real-world tier: the tests marked #[ignore = "real-world"], which need the corpus
#   fetched above (release mode: the real-world inputs are 1.3 GB); then every interleaving of
#   concurrent loads on one runtime cache (the loom model).
real_world_tests() {
  cargo test --workspace --release -- --ignored &&
    cargo test -p kpack-runtime --features loom-model --release --test loom_cache
}
# - A fuzz smoke run of every fuzz target.
fuzz_smoke() { scripts/fuzz-smoke.sh "${KPACK_FUZZ_SECONDS:-15}"; }
# - The Python package (issue 8): the wheel built above, installed into a fresh venv, whose
#   `kpack` command and package the pytest suite then exercise on the fixtures. pytest's exit
#   status fails the run, 5 (no test collected) included.
python_package() {
  local wheel
  wheel=$(ls target/wheels/kpack-*.whl)
  echo "wheel: $wheel"
  python3 -m venv "$pyenv_dir/venv" &&
    "$pyenv_dir/venv/bin/pip" install -q "$wheel" pytest==9.2.0 &&
    "$pyenv_dir/venv/bin/kpack" --version &&
    "$pyenv_dir/venv/bin/python" -m pytest -p no:cacheprovider python/tests
}
# - librocm_kpack.so as it ships: its stripped size within its budget, its NEEDED list.
capi_size() { scripts/capi-size.sh; }
# - The Windows stage (issue 37, scripts/windows.sh): kpack.exe and rocm_kpack.dll built with
#   the Debian-packaged Windows toolchain that the set-up installed (scripts/windows-toolchain.sh),
#   the tests of every crate that builds for Windows and needs no Linux tool run under wine,
#   and kpack.exe's commands and the runtime's loads compared with the Linux kpack ($KPACK_BIN).
#   It runs here rather than as a stage of its own: it is mostly compiling, and the real-world
#   tier, which sets this group's length, leaves a core idle in spells (one long level-19 test
#   alone at the end of its binary) that the Windows build fills; niced, so that the tier keeps
#   the cores it can use. KPACK_WINDOWS_STAGE=0 leaves it out (and the set-up then fetches no
#   Windows toolchain), for a machine where wine cannot run; CI runs it.
windows_stage() { nice -n 10 scripts/windows.sh; }
pyenv_dir=$(mktemp -d)
stages_at_once=("real-world tests" real_world_tests "fixture tests" fixture_tests
  "fuzz smoke" fuzz_smoke "python package" python_package "librocm_kpack size" capi_size)
[ "${KPACK_WINDOWS_STAGE:-1}" = 0 ] || stages_at_once+=("windows (wine)" windows_stage)
at_once "${stages_at_once[@]}"

# Each bench's figures and time, also written to target/benchmark-figures.md (scripts/bench.sh
# writes docs/benchmark-figures.md the same way).
stage "benchmarks" scripts/bench.sh --output target/benchmark-figures.md
# The distribution benchmark's slice: the map/reduce on two ROCm 7.2.4 packages the set-up
# fetched, peak RSS held to 512 MiB and strict identity verified (docs/benchmarks.md).
stage "distribution slice" scripts/bench-distribution.sh --slice

passed=$(sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' "$results" | awk '{s += $1} END {print s + 0}')
failed=$(sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' "$results" | awk '{s += $1} END {print s + 0}')
trap - EXIT
print_stages
echo "kpack: $passed passed, $failed failed"
