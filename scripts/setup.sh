#!/usr/bin/env bash
# Installs what the test suite needs on Debian bookworm, idempotently, and fetches the
# real-world corpus (bookworm's librocsparse0, PyPI jax-rocm7-plugin wheels) into
# $KPACK_CORPUS (default /var/tmp/kpack-corpus; same layout as shared/corpus/fetch_corpus.sh).
set -euo pipefail
CORPUS=${KPACK_CORPUS:-/var/tmp/kpack-corpus}
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo

# clang-tools-15: clang-offload-bundler-15, the independent witness for unbundling.
# binutils/elfutils/patchelf: readelf, objcopy, eu-elflint, patchelf as witnesses for ELF output.
# gcc, cmake, pkg-config: the C stand-ins and the C API's CMake package test.
PKGS="clang-tools-15 binutils elfutils patchelf zstd gcc cmake pkg-config unzip"
missing=
for p in $PKGS; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "setup: installing cargo-fuzz"
  cargo install -q cargo-fuzz --locked
fi

mkdir -p "$CORPUS/debs" "$CORPUS/x" "$CORPUS/wheels" "$CORPUS/wx"
# Real-world tier inputs: bookworm librocsparse0 5.3 (1.31 GB library, 111 bundles, 7 targets).
ROCSPARSE="$CORPUS/x/librocsparse0_5.3.0+dfsg-2/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1"
if [ ! -f "$ROCSPARSE" ]; then
  echo "setup: fetching librocsparse0"
  (cd "$CORPUS/debs" && apt-get download -q librocsparse0=5.3.0+dfsg-2 >/dev/null 2>&1)
  mkdir -p "$CORPUS/x/librocsparse0_5.3.0+dfsg-2"
  dpkg-deb -x "$CORPUS"/debs/librocsparse0_5.3.0+dfsg-2_amd64.deb "$CORPUS/x/librocsparse0_5.3.0+dfsg-2"
fi
# PyPI jax-rocm7-plugin: CCOB v3 bundles, generic targets (0.10.0), a 2-wrapper _solver.so.
for spec in jax-rocm7-plugin==0.12.0 jax-rocm7-plugin==0.10.0; do
  v=${spec#*==}
  if ! ls "$CORPUS"/wheels/jax_rocm7_plugin-"$v"-*.whl >/dev/null 2>&1; then
    echo "setup: fetching $spec"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 "$spec" -d "$CORPUS/wheels"
  fi
done
for w in "$CORPUS"/wheels/jax_rocm7_plugin-*.whl; do
  n=$(basename "$w" .whl)
  [ -d "$CORPUS/wx/$n" ] || unzip -q -o "$w" -d "$CORPUS/wx/$n"
done
echo "setup: ready (corpus in $CORPUS)"
