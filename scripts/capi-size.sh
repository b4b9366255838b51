#!/usr/bin/env bash
# librocm_kpack.so as it ships (`cargo build -p kpack-capi`: the runtime, the archive reader
# without kpack-archive's writer, libc), stripped: prints its size and its NEEDED list, and
# fails when the size exceeds the budget or the NEEDED list changes. The workspace's test build
# cannot be measured instead: its dev-dependencies unify the writer into kpack-archive (16 KB).
# Its own target directory, so that the test build's libraries are not replaced by this one.
set -euo pipefail
cd "$(dirname "$0")/.."
# Bytes, stripped: the size before issue 35 (80feaaa). Raised only with the reason, in the
# commit that raises it.
budget=1069904
expected_needed="libgcc_s.so.1 libc.so.6 ld-linux-x86-64.so.2"
host=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release --quiet -p kpack-capi --lib --target "$host" --target-dir target/capi
lib=target/capi/$host/release/librocm_kpack.so
stripped=$(mktemp)
trap 'rm -f "$stripped"' EXIT
strip -o "$stripped" "$lib"
size=$(stat -c %s "$stripped")
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p' | paste -sd' ')
echo "librocm_kpack.so: $size bytes stripped (budget $budget); NEEDED: $needed"
[ "$needed" = "$expected_needed" ] ||
  { echo "capi-size: NEEDED is '$needed', expected '$expected_needed'" >&2; exit 1; }
[ "$size" -le "$budget" ] ||
  { echo "capi-size: $size bytes stripped, over the budget of $budget" >&2; exit 1; }
