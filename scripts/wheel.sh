#!/usr/bin/env bash
# Builds the Python package's wheel into target/wheels (manylinux_2_28, abi3): the `kpack`
# binary and `kpack._native`, both linked by zig against glibc 2.28 (docs/python.md).
#
# maturin builds one crate into a wheel (PyO3/maturin#368): the module. The binary goes in as
# the wheel's data (`scripts/kpack`, installed where the environment's commands go; the
# directory pyproject.toml names). It is built inside maturin's run, by the `cargo` maturin
# calls (a shim first on PATH), just before maturin's own compile, so that it sees maturin's
# environment (the zig linker and C compiler wrappers, which cargo's fingerprints include),
# and in one cargo run with `-p kpack-python` (no target of it built, only its features):
# every crate the two share is then compiled once, with the features and the settings
# maturin's compile then finds fresh, instead of twice.
set -euo pipefail
cd "$(dirname "$0")/.."
PY_TOOLS=${KPACK_PY_TOOLS:-/var/tmp/kpack-pytools}
root=$PWD
host=$(rustc -vV | sed -n 's/^host: //p')
data=$root/target/wheel/kpack.data/scripts
rm -rf "$data" target/wheels/kpack-*.whl
mkdir -p "$data"
shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
cat >"$shim/cargo" <<SHIM
#!/bin/sh
set -e
if [ "\$1" = rustc ]; then
  "$(command -v cargo)" build --release --quiet --target $host --target-dir "$root/target/wheel" \\
    --manifest-path "$root/Cargo.toml" -p kpack-cli -p kpack-python --bin kpack >&2
  strip -o "$data/kpack" "$root/target/wheel/$host/release/kpack"
fi
exec "$(command -v cargo)" "\$@"
SHIM
chmod +x "$shim/cargo"
PATH="$shim:$PY_TOOLS/bin:$PATH" maturin build --release --zig --compatibility manylinux_2_28 \
  --target-dir target/wheel --out target/wheels
test -x "$data/kpack" || { echo "wheel.sh: the kpack binary was not built" >&2; exit 1; }
