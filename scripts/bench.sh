#!/usr/bin/env bash
# Runs every benchmark of the workspace (`cargo bench` targets) one after the other and writes
# what each printed into one Markdown file: the figures docs/benchmarks.md explains, written
# by the benches themselves rather than copied into prose by hand.
#
#   scripts/bench.sh [--output FILE] [BENCH...]
#
# FILE defaults to docs/benchmark-figures.md (commit it after a run on a quiet machine);
# CI writes target/benchmark-figures.md. Each bench's wall time is printed too, so the cost
# of the benchmark stage is visible bench by bench. Naming benches runs only those. Exits
# non-zero, naming it, when a bench fails (a bench fails when a figure it guards, such as
# peak memory, is out of bounds); the file is then not written.
set -euo pipefail
cd "$(dirname "$0")/.."
output=docs/benchmark-figures.md
if [ "${1:-}" = --output ]; then
  output=$2
  shift 2
fi
export KPACK_CORPUS=${KPACK_CORPUS:-/var/tmp/kpack-corpus}

# Every bench target: "package bench" per line, in workspace order.
benches=$(cargo metadata --no-deps --format-version 1 |
  jq -r '.packages[] | .name as $p | .targets[] | select(.kind | index("bench")) | "\($p) \(.name)"')
if [ $# -gt 0 ]; then
  wanted=" $* "
  benches=$(echo "$benches" | while read -r package bench; do
    if [[ $wanted == *" $bench "* ]]; then echo "$package $bench"; fi
  done)
fi
# Built once up front, with the workspace's features, as `cargo test --workspace` builds them.
cargo bench --workspace --benches --no-run --quiet

body=$(mktemp)
out=$(mktemp)
trap 'rm -f "$body" "$out"' EXIT
total_start=$SECONDS
while read -r package bench; do
  start=$SECONDS
  echo "bench: $package/$bench"
  if ! cargo bench --workspace --quiet --bench "$bench" | tee "$out"; then
    echo "bench: $package/$bench failed" >&2
    exit 1
  fi
  took=$((SECONDS - start))
  echo "bench: $package/$bench took ${took} s"
  {
    echo "## $bench"
    echo
    echo "\`cargo bench -p $package --bench $bench\`, ${took} s:"
    echo
    echo '```'
    cat "$out"
    echo '```'
    echo
  } >>"$body"
done <<<"$benches"

mkdir -p "$(dirname "$output")"
{
  echo "# Benchmark figures"
  echo
  echo "Written by \`scripts/bench.sh\` (do not edit by hand; docs/benchmarks.md explains each"
  echo "bench and its targets). Commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ' with local changes'),"
  echo "$(date -u +%Y-%m-%d), $(nproc) cores, $(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1048576)) GiB;"
  echo "all benches took $((SECONDS - total_start)) s."
  echo
  cat "$body"
} >"$output.tmp"
mv "$output.tmp" "$output"
echo "bench: figures written to $output"
