#!/usr/bin/env bash
# Installs what the test suite needs on Debian bookworm, idempotently, and fetches the
# real-world corpus (bookworm's librocsparse0, PyPI jax-rocm7-plugin wheels, Debian ROCm 7.2.4
# librocblas5/libhipblaslt1/libhipsparselt0 kernel databases, librocsparse1) into
# $KPACK_CORPUS (default /var/tmp/kpack-corpus; same layout as shared/corpus/fetch_corpus.sh).
set -euo pipefail
CORPUS=${KPACK_CORPUS:-/var/tmp/kpack-corpus}
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo

# The tools that build (cargo's, maturin and zig) come first: test.sh builds the fuzz targets
# and the wheel as soon as they are there (KPACK_SETUP_TOOLS_READY names a file touched then),
# while the packages and the corpus below are still downloading.
#
# cargo's tools, built unoptimized into one target directory: they drive builds and read a
# few hundred source files, so their speed does not matter, and an optimized build of both
# took 230 s of CPU against 116 s (CI runs this beside the test build, on the same cores).
tools_target=$(mktemp -d)
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  echo "setup: installing cargo-fuzz"
  cargo install -q cargo-fuzz --locked --debug --target-dir "$tools_target"
fi
# Unused dependencies fail CI (docs/CONTRIBUTING.md); cargo-machete reads sources, offline.
if ! command -v cargo-machete >/dev/null 2>&1; then
  echo "setup: installing cargo-machete"
  cargo install -q cargo-machete --version 0.9.2 --locked --debug --target-dir "$tools_target"
fi
rm -rf "$tools_target"

# --- Python package (issue 8) ---------------------------------------------------------------
# A venv of the tools that build and test the wheel: maturin, ziglang (zig links the wheel
# against glibc 2.28's symbols, so it is manylinux_2_28 without a manylinux container) and
# pytest. The test venv itself is made fresh by test.sh.
PY_TOOLS=${KPACK_PY_TOOLS:-/var/tmp/kpack-pytools}
PY_TOOL_PKGS="maturin==1.16.0 ziglang==0.17.1 pytest==9.2.0"
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "setup: installing python3-venv"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
fi
if [ "$(cat "$PY_TOOLS/.kpack-tools" 2>/dev/null)" != "$PY_TOOL_PKGS" ]; then
  echo "setup: installing $PY_TOOL_PKGS into $PY_TOOLS"
  rm -rf "$PY_TOOLS"
  python3 -m venv "$PY_TOOLS"
  "$PY_TOOLS/bin/pip" install -q $PY_TOOL_PKGS
  echo "$PY_TOOL_PKGS" > "$PY_TOOLS/.kpack-tools"
fi
# ----------------------------------------------------------------------------------------------
[ -z "${KPACK_SETUP_TOOLS_READY:-}" ] || touch "$KPACK_SETUP_TOOLS_READY"

# clang-tools-15: clang-offload-bundler-15, the independent witness for unbundling.
# binutils/elfutils/patchelf: readelf, objcopy, eu-elflint, patchelf as witnesses for ELF output.
# gcc, cmake, pkg-config: the C stand-ins and the C API's CMake package test.
# zip, unzip: the naive re-zip baseline of the wheel benchmark; python3-venv: the fresh venvs
# the split wheels are pip-installed into. jq, xz-utils: the example CI workflow's steps and its
# local dry run; tar and zstd also witness kpack's .tar.zst artifacts. chromium,
# fonts-dejavu-core: the `kpack report` page rendered headless and screenshotted.
PKGS="clang-tools-15 binutils elfutils patchelf zstd gcc cmake pkg-config unzip zip python3-venv jq xz-utils
  chromium fonts-dejavu-core"
# aarch64 and ppc64le (issue 13): qemu-user runs the cross libc's loader on the fixtures, the
# cross gcc builds the stand-in HIP runtime for each, the cross binutils strip the outputs;
# libgcc-12-dev-*-cross lets build_platforms.sh's clang link against the cross libcs.
PKGS="$PKGS qemu-user-static gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu libc6-dev-arm64-cross
  libgcc-12-dev-arm64-cross gcc-powerpc64le-linux-gnu binutils-powerpc64le-linux-gnu
  libc6-dev-ppc64el-cross libgcc-12-dev-ppc64el-cross"
# Windows PE/COFF (issue 13): wine64 loads the PE fixtures in the tests; the mingw GNU ld
# links the long-section-name fixture of fixtures/platforms/build_platforms.sh. wine (its
# `wine` command) and mingw also serve the Windows stage (issue 37, windows-toolchain.sh
# below), in this one apt transaction.
PKGS="$PKGS wine wine64 gcc-mingw-w64-x86-64"
# pip downloads the PyPI wheels of the corpus.
python3 -m pip --version >/dev/null 2>&1 || PKGS="$PKGS python3-pip"
missing=
for p in $PKGS; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

# check-jsonschema (GitHub's workflow schema bundled, so validation works offline) and PyYAML
# (scripts/ci-dry-run.py) for the example workflow's test, in a venv of their own.
CI_VENV=${KPACK_CI_VENV:-/opt/kpack-ci-venv}
if [ ! -x "$CI_VENV/bin/check-jsonschema" ] || ! "$CI_VENV/bin/python" -c 'import yaml' 2>/dev/null; then
  echo "setup: installing check-jsonschema and PyYAML into $CI_VENV"
  $SUDO python3 -m venv "$CI_VENV"
  $SUDO "$CI_VENV/bin/pip" install -q check-jsonschema pyyaml
fi
command -v check-jsonschema >/dev/null 2>&1 || $SUDO ln -sf "$CI_VENV/bin/check-jsonschema" /usr/local/bin/check-jsonschema

mkdir -p "$CORPUS/debs" "$CORPUS/x" "$CORPUS/wheels" "$CORPUS/wx"
# Real-world tier inputs: bookworm librocsparse0 5.3 (1.31 GB library, 111 bundles, 7 targets).
ROCSPARSE="$CORPUS/x/librocsparse0_5.3.0+dfsg-2/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1"
if [ ! -f "$ROCSPARSE" ]; then
  echo "setup: fetching librocsparse0"
  # The package lists may never have been fetched on a machine that had the tools already.
  (cd "$CORPUS/debs" && apt-get download -q librocsparse0=5.3.0+dfsg-2 >/dev/null 2>&1) ||
    { $SUDO apt-get update -qq && (cd "$CORPUS/debs" && apt-get download -q librocsparse0=5.3.0+dfsg-2); }
  mkdir -p "$CORPUS/x/librocsparse0_5.3.0+dfsg-2"
  dpkg-deb -x "$CORPUS"/debs/librocsparse0_5.3.0+dfsg-2_amd64.deb "$CORPUS/x/librocsparse0_5.3.0+dfsg-2"
fi
# PyPI jax-rocm7-plugin: CCOB v3 bundles, generic targets (0.10.0), a 2-wrapper _solver.so.
# PyPI cupy-rocm-7-0 14.2.0: three fat extension modules, uncompressed bundles, 9 targets
# (the wheel-splitting real-world tier).
for spec in jax-rocm7-plugin==0.12.0 jax-rocm7-plugin==0.10.0 cupy-rocm-7-0==14.2.0; do
  v=${spec#*==}
  n=${spec%%==*}
  if ! ls "$CORPUS"/wheels/"${n//-/_}"-"$v"-*.whl >/dev/null 2>&1; then
    echo "setup: fetching $spec"
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux2014_x86_64 "$spec" -d "$CORPUS/wheels"
  fi
done
for w in "$CORPUS"/wheels/jax_rocm7_plugin-*.whl "$CORPUS"/wheels/cupy_rocm_7_0-*.whl; do
  n=$(basename "$w" .whl)
  [ -d "$CORPUS/wx/$n" ] || unzip -q -o "$w" -d "$CORPUS/wx/$n"
done
# private_apt: a private apt configuration (nothing installed system-wide).
. "$(dirname "$0")/private-apt.sh"
# Split/recombine real-world tier: Debian ROCm 7.2.4 kernel databases with their fat libraries
# (experimental librocblas5, libhipblaslt1; libhipsparselt0), and librocsparse1 (319 CCOB v3,
# 2.1 GB decompressed: the memory benchmark's largest input), fetched with a private apt
# configuration for trixie/sid/experimental (nothing is installed system-wide).
ROCM_DEBS="librocblas5=7.2.4-1~exp1 libhipblaslt1=7.2.4+dfsg-1~exp1 libhipsparselt0=7.2.4+ds-1~exp1 librocsparse1=7.2.4-1~exp1"
need_debs=
for spec in $ROCM_DEBS; do
  pkg=${spec%%=*}
  ls -d "$CORPUS"/x/"${pkg}"_7.2.4* >/dev/null 2>&1 || need_debs="$need_debs $spec"
done
if [ -n "$need_debs" ]; then
  echo "setup: fetching$need_debs"
  A="$CORPUS/apt"
  private_apt "$A" amd64 trixie sid experimental
  for spec in $need_debs; do
    # Pinned versions first; sid/experimental move, so fall back to the current candidate.
    (cd "$CORPUS/debs" && APT_CONFIG="$A/apt.conf" apt-get download -q "$spec" >/dev/null 2>&1) || {
      echo "setup: $spec not available any more; taking the current ${spec%%=*}" >&2
      (cd "$CORPUS/debs" && APT_CONFIG="$A/apt.conf" apt-get download -q "${spec%%=*}")
    }
  done
fi
for d in "$CORPUS"/debs/librocblas5_*.deb "$CORPUS"/debs/libhipblaslt1_*.deb "$CORPUS"/debs/libhipsparselt0_*.deb "$CORPUS"/debs/librocsparse1_*.deb; do
  [ -f "$d" ] || continue
  n=$(basename "$d" .deb); n=${n%_amd64}; n=${n%_all}
  [ -d "$CORPUS/x/$n" ] || { mkdir -p "$CORPUS/x/$n" && dpkg-deb -x "$d" "$CORPUS/x/$n"; }
done
# aarch64 real-world tier (issue 13): bookworm's arm64 librocrand1 5.3.3 (GNU ld, 7 targets),
# fetched with a private apt configuration whose architecture is arm64.
ROCRAND_ARM64=librocrand1_5.3.3-4_arm64
if [ ! -d "$CORPUS/x/$ROCRAND_ARM64" ]; then
  echo "setup: fetching librocrand1:arm64"
  A="$CORPUS/apt-arm64"
  mkdir -p "$CORPUS/debs"
  private_apt "$A" arm64 bookworm
  (cd "$CORPUS/debs" && APT_CONFIG="$A/apt.conf" apt-get download -q librocrand1:arm64=5.3.3-4)
  rm -rf "$CORPUS/x/$ROCRAND_ARM64.tmp"
  dpkg-deb -x "$CORPUS/debs/$ROCRAND_ARM64.deb" "$CORPUS/x/$ROCRAND_ARM64.tmp"
  mv "$CORPUS/x/$ROCRAND_ARM64.tmp" "$CORPUS/x/$ROCRAND_ARM64"
fi
# LLVM 22 (issues 10, 12, 13): Debian trixie's clang-offload-bundler (reads and writes CCOB v3,
# the witness for compressed bundles), llvm-objdump/llvm-offload-binary (witnesses for LLVM's
# OffloadBinary), clang-22 and lld (the fixture scripts' compiler and linkers, lld-link for PE).
# They need glibc >= 2.38, so trixie's glibc is unpacked beside them and `$CORPUS/llvmv 22 TOOL`
# runs a tool through its own ld.so; clang and lld re-exec themselves, so their interpreter and
# rpath are patched to run natively. Same layout as shared/corpus/fetch_corpus.sh llvm.
LLVM_ROOT="$CORPUS/llvm22root"
if [ ! -x "$CORPUS/llvmv" ] || [ ! -f "$LLVM_ROOT/usr/lib/llvm-22/bin/clang-offload-bundler" ] ||
  [ ! -f "$LLVM_ROOT/usr/lib/llvm-22/bin/lld" ]; then
  echo "setup: fetching LLVM 22 from trixie"
  V22=1:22.1.8-1~deb13u4
  LLVM_DEBS="clang-tools-22=$V22 libllvm22=$V22 libclang-cpp22=$V22 llvm-22=$V22 clang-22=$V22
    libclang-common-22-dev=$V22 lld-22=$V22 libc6=2.41-12+deb13u4 libstdc++6=14.2.0-19 libgcc-s1=14.2.0-19
    libxml2=2.12.7+dfsg+really2.9.14-2.1+deb13u3 libz3-4=4.13.3-1 libzstd1=1.5.7+dfsg-1
    zlib1g=1:1.3.dfsg+really1.3.1-1+b1 libffi8=3.4.8-2 libedit2=3.1-20250104-1 libtinfo6=6.5+20250216-2
    libbsd0=0.12.2-2 libmd0=1.1.0-2+b1 libicu76=76.1-4 liblzma5=5.8.1-1+deb13u1"
  A="$CORPUS/apt"
  private_apt "$A" amd64 trixie sid experimental
  D="$CORPUS/debs/trixie-llvm"
  mkdir -p "$D"
  for spec in $LLVM_DEBS; do
    (cd "$D" && APT_CONFIG="$A/apt.conf" apt-get download -q "$spec" >/dev/null 2>&1) || {
      echo "setup: $spec not available any more; taking the current ${spec%%=*}" >&2
      (cd "$D" && APT_CONFIG="$A/apt.conf" apt-get download -q "${spec%%=*}")
    }
  done
  # The current sid candidate links libxml2.so.16: harmless when unused.
  (cd "$D" && APT_CONFIG="$A/apt.conf" apt-get download -q libxml2-16 >/dev/null 2>&1) || true
  rm -rf "$LLVM_ROOT.tmp"
  mkdir -p "$LLVM_ROOT.tmp"
  for d in "$D"/*.deb; do dpkg-deb -x "$d" "$LLVM_ROOT.tmp"; done
  RP="$LLVM_ROOT/usr/lib/x86_64-linux-gnu:$LLVM_ROOT/usr/lib/llvm-22/lib"
  for b in clang lld clang-offload-bundler clang-linker-wrapper llvm-readobj llvm-objcopy llvm-objdump llvm-offload-binary; do
    f="$LLVM_ROOT.tmp/usr/lib/llvm-22/bin/$b"
    if [ -f "$f" ] && [ ! -L "$f" ]; then
      patchelf --set-interpreter "$LLVM_ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" \
        --force-rpath --set-rpath "$RP" "$f"
    fi
  done
  for l in libLLVM.so.22.1 libclang-cpp.so.22.1; do
    f="$LLVM_ROOT.tmp/usr/lib/x86_64-linux-gnu/$l"
    if [ -f "$f" ]; then patchelf --set-rpath "$RP" "$f"; fi
  done
  rm -rf "$LLVM_ROOT"
  mv "$LLVM_ROOT.tmp" "$LLVM_ROOT"
  {
    echo '#!/bin/sh'
    echo '# llvmv VER TOOL args...   (VER = 22)'
    echo 'v=$1; t=$2; shift 2'
    echo "exec $LLVM_ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path $LLVM_ROOT/usr/lib/x86_64-linux-gnu:$LLVM_ROOT/usr/lib/llvm-\$v/lib $LLVM_ROOT/usr/lib/llvm-\$v/bin/\$t \"\$@\""
  } > "$CORPUS/llvmv"
  chmod +x "$CORPUS/llvmv"
  "$CORPUS/llvmv" 22 clang-offload-bundler --version | head -n 1
fi
# SPIR-V fixtures (fixtures/spirv/build_spirv.sh): clang-22 --offload-arch=amdgcnspirv runs
# llvm-link and llvm-spirv (SPIRV-LLVM-Translator 22, from sid) beside it. Same steps as
# shared/corpus/fetch_corpus.sh llvm: llvm-spirv-22 copied to llvm-22/bin, both patched to
# run natively.
SPIRV_BIN="$LLVM_ROOT/usr/lib/llvm-22/bin"
if [ ! -f "$SPIRV_BIN/llvm-spirv" ] || [ -L "$SPIRV_BIN/llvm-link" ]; then
  echo "setup: fetching llvm-spirv 22 from sid"
  A="$CORPUS/apt"
  private_apt "$A" amd64 trixie sid experimental
  D="$CORPUS/debs/trixie-llvm"
  mkdir -p "$D"
  (cd "$D" && APT_CONFIG="$A/apt.conf" apt-get download -q llvm-spirv-22 libllvmspirvlib22.1)
  for d in "$D"/llvm-spirv-22_*.deb "$D"/libllvmspirvlib22.1_*.deb; do dpkg-deb -x "$d" "$LLVM_ROOT"; done
  cp -f "$LLVM_ROOT/usr/bin/llvm-spirv-22" "$SPIRV_BIN/llvm-spirv"
  f="$SPIRV_BIN/llvm-link"
  if [ -L "$f" ]; then cp --remove-destination "$(readlink -f "$f")" "$f"; fi
  RP="$LLVM_ROOT/usr/lib/x86_64-linux-gnu:$LLVM_ROOT/usr/lib/llvm-22/lib"
  for b in llvm-link llvm-spirv; do
    patchelf --set-interpreter "$LLVM_ROOT/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" \
      --force-rpath --set-rpath "$RP" "$SPIRV_BIN/$b"
  done
  "$SPIRV_BIN/llvm-spirv" --version | head -n 1
fi
# Windows (issue 37): the toolchain of test.sh's Windows stage (scripts/windows-toolchain.sh:
# sid's rustc with rust-src for -Zbuild-std into $CORPUS/rustwin, mingw-w64 and wine from the
# packages above, a wine prefix), fetched here so that its downloads overlap the Linux build
# as the corpus's do. Idempotent; not with KPACK_WINDOWS_STAGE=0 (scripts/test.sh then
# leaves the stage out).
[ "${KPACK_WINDOWS_STAGE:-1}" = 0 ] || "$(dirname "$0")/windows-toolchain.sh"
echo "setup: ready (corpus in $CORPUS)"
