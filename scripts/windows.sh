#!/usr/bin/env bash
# The Windows stage (issue 37): builds kpack.exe and rocm_kpack.dll for x86_64-pc-windows-gnu
# with the toolchain of scripts/windows-toolchain.sh (sid's rustc, -Zbuild-std, mingw-w64) and
# runs under wine, in one cargo invocation, the tests of every crate that builds for Windows and
# needs no Linux tool; checks that rocm_kpack.dll exports exactly the functions of
# rocm_kpack.def (the same 14 as the header, which crates/kpack-capi/tests/it/header.rs
# checks), and makes the MSVC import library rocm_kpack.lib from that .def with dlltool; runs
# kpack.exe's commands under wine against the Linux kpack (scripts/windows-cli.sh), and loads
# the transformed PE fixtures through rocm_kpack.dll (scripts/windows-e2e.sh). Prints cargo's
# closing lines (and one of that form for the kpack.exe checks); exits non-zero on any
# failure. scripts/test.sh runs it beside the real-world tier.
#
# Its own target directory (target/windows): sid's rustc and rustup's share no artifacts.
# Doctests are not run (rustdoc would need the sid toolchain's own cross set-up); every other
# test is. The windows-ci profile (Cargo.toml: release at opt-level 1, without debug info).
set -euo pipefail
cd "$(dirname "$0")/.."
export KPACK_CORPUS=${KPACK_CORPUS:-/var/tmp/kpack-corpus}
[ -f "$KPACK_CORPUS/rustwin/env.sh" ] || scripts/windows-toolchain.sh
# shellcheck source=/dev/null
. "$KPACK_CORPUS/rustwin/env.sh"
TARGET=x86_64-pc-windows-gnu
build=(--profile windows-ci -Zbuild-std=std,panic_abort --target "$TARGET")

# The crates whose tests build for Windows and need no Linux tool (a test of theirs that needs
# one, or that Windows cannot pass for a stated reason, says so:
# `#[cfg_attr(windows, ignore = "needs …")]`); kpack-elf's parsers and rewriters and
# kpack-pipeline's transform, restore and resolve run so, their witnesses (readelf, eu-elflint,
# strip, objcopy, patchelf, cc, clang-offload-bundler, qemu-user, the stand-in HIP runtime on
# Linux's ld.so) ignored. Left out, each for its tests (which build for Windows all the same):
# kpack-artifact (43 of its 50 tests fail under wine: most arrange shard trees holding symbolic
# links, which wine does not make, or use tar, cp or the stand-in runtime as witnesses) and
# kpack-wheel (python3's zipfile and unzip are the witnesses of 18 of its 20); kpack-prune
# (the stand-in runtime and clang-offload-bundler); kpack-report (headless Chromium); kpack-cli
# (all of those; scripts/windows-cli.sh runs kpack.exe against the Linux kpack instead, split
# and recombine of a Linux artifact tarball included); kpack-capi-install (CMake and gcc);
# kpack-python (a Windows CPython is not to be had here); kpack-testkit (the layering test
# needs cargo metadata of the Linux workspace). Their libraries are built all the same, as
# kpack.exe's.
crates=(kpack-target kpack-bundle kpack-offload kpack-msgpack kpack-hostbin kpack-archive
  kpack-tar kpack-wheelfile kpack-fs kpack-runtime kpack-capi kpack-pe kpack-ar kpack-detect
  kpack-concurrency kpack-inputs kpack-package kpack-elf kpack-pipeline)
# The tests first (under wine; --no-fail-fast: every failing crate is reported, and the stage
# still fails), then rocm_kpack.dll and install-rocm-kpack.exe as they ship (the runtime and
# the archive reader: a small tree of its own), which reuse every crate they share with the
# tests. In this order because the test build links rocm_kpack.dll too, with its
# dev-dependencies' features (the archive writer), into the same file: built last, the DLL
# checked, installed and loaded below is the one that ships. kpack.exe is built below with
# the wheel that ships it.
cargo test "${build[@]}" --no-fail-fast --lib --tests "${crates[@]/#/-p=}"
cargo build "${build[@]}" -p kpack-capi --lib -p kpack-capi-install --bin install-rocm-kpack

out="$CARGO_TARGET_DIR/$TARGET/windows-ci"
def=crates/kpack-capi/rocm_kpack.def
exported=$(x86_64-w64-mingw32-objdump -p "$out/rocm_kpack.dll" |
  sed -n '/\[Ordinal\/Name Pointer\] Table/,/^$/p' | sed -n 's/^\s*\[ *[0-9]*\] //p' | sort)
listed=$(sed -n 's/^ *\(kpack_[a-z_]*\).*/\1/p' "$def" | sort)
if [ "$exported" != "$listed" ]; then
  echo "windows: rocm_kpack.dll's exports differ from $def:" >&2
  diff <(echo "$listed") <(echo "$exported") >&2 || true
  exit 1
fi
x86_64-w64-mingw32-dlltool --input-def "$def" --dllname rocm_kpack.dll --machine i386:x86-64 \
  --output-lib "$out/rocm_kpack.lib"
echo "windows: rocm_kpack.dll exports the $(echo "$exported" | wc -l) functions of $def;" \
  "import libraries $out/librocm_kpack.dll.a (MinGW) and $out/rocm_kpack.lib (MSVC)"
# The C library installed with the Windows layout (bin/ the DLL, lib/ the import libraries)
# and used through its CMake package by a C program built with CMake and MinGW, under wine.
scripts/windows-install.sh "$out"

# The win_amd64 wheel, built with kpack.exe as its `kpack` command (one build of kpack.exe:
# the one the wheel ships is the one tested below; built apart from it, it compiled the whole
# command-line tree a second time) and its tags and contents checked (it cannot be installed
# here: no Windows CPython).
scripts/windows-wheel.sh

# kpack.exe, every command's code, and the commands of the acceptance run under wine against
# the Linux kpack (scripts/windows-cli.sh): $KPACK_BIN, as scripts/test.sh sets it, else the
# release build for x86_64-unknown-linux-gnu (build it first in a shell without env.sh).
linux_kpack=${KPACK_BIN:-target/x86_64-unknown-linux-gnu/release/kpack}
[ -x "$linux_kpack" ] || { echo "windows: no Linux kpack at $linux_kpack to compare with" >&2; exit 1; }
scripts/windows-cli.sh "$out/kpack.exe" "$linux_kpack"
# The PE fixture DLLs transformed by kpack.exe, loaded by a Windows program through a stand-in
# HIP runtime on rocm_kpack.dll: every code object byte for byte the original's.
scripts/windows-e2e.sh "$out" "$linux_kpack"
# A C program through the header's dllimport declarations and each import library, under wine.
smoke=$(mktemp -d)
trap 'rm -rf "$smoke"' EXIT
cp "$out/rocm_kpack.dll" fixtures/vectors/test_zstd.kpack "$smoke/"
for implib in librocm_kpack.dll.a rocm_kpack.lib; do
  x86_64-w64-mingw32-gcc -O1 -Icrates/kpack-capi/include -o "$smoke/smoke.exe" \
    crates/kpack-capi/tests/c/windows_smoke.c "$out/$implib"
  (cd "$smoke" && "$CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER" smoke.exe test_zstd.kpack) |
    tr -d '\r' | sed "s/^/windows: $implib: /"
done
