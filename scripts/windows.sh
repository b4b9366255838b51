#!/usr/bin/env bash
# The Windows stage (issue 37): builds for x86_64-pc-windows-gnu with the toolchain of
# scripts/windows-toolchain.sh (sid's rustc, -Zbuild-std, mingw-w64) and runs under wine the
# tests of every crate that builds for Windows, in one cargo invocation; then builds
# rocm_kpack.dll, checks that it exports exactly the functions of rocm_kpack.def (the same
# 14 as the header, which crates/kpack-capi/tests/it/header.rs checks), and makes the MSVC
# import library rocm_kpack.lib from that .def with dlltool; builds kpack.exe and runs its
# commands under wine against the Linux kpack (scripts/windows-cli.sh), and loads the
# transformed PE fixtures through rocm_kpack.dll (scripts/windows-e2e.sh). Prints cargo's
# closing lines (and one of that form for the kpack.exe checks); exits non-zero on any
# failure.
#
# Its own target directory (target/windows): sid's rustc and rustup's share no artifacts.
# Doctests are not run (rustdoc would need the sid toolchain's own cross set-up); every other
# test is. The release profile without debug info, as in scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export KPACK_CORPUS=${KPACK_CORPUS:-/var/tmp/kpack-corpus}
export CARGO_PROFILE_RELEASE_DEBUG=0
[ -f "$KPACK_CORPUS/rustwin/env.sh" ] || scripts/windows-toolchain.sh
# shellcheck source=/dev/null
. "$KPACK_CORPUS/rustwin/env.sh"
TARGET=x86_64-pc-windows-gnu
build=(--release -Zbuild-std=std,panic_abort --target "$TARGET")

# The crates whose tests need no Linux tool and build for Windows today. kpack-capi's tests
# need kpack-pipeline, kpack-artifact and kpack-wheel, which do not yet; its library is
# built below.
crates=(kpack-target kpack-bundle kpack-offload kpack-msgpack kpack-hostbin kpack-archive
  kpack-tar kpack-wheelfile kpack-fs kpack-runtime)
cargo test "${build[@]}" --lib --tests "${crates[@]/#/-p=}"

cargo build "${build[@]}" --lib -p kpack-capi
out="$CARGO_TARGET_DIR/$TARGET/release"
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

# kpack.exe, every command's code, and the commands of the acceptance run under wine against
# the Linux kpack (scripts/windows-cli.sh): $KPACK_BIN, as scripts/test.sh sets it, else the
# release build for x86_64-unknown-linux-gnu (build it first in a shell without env.sh).
cargo build "${build[@]}" -p kpack-cli --bin kpack
linux_kpack=${KPACK_BIN:-target/x86_64-unknown-linux-gnu/release/kpack}
[ -x "$linux_kpack" ] || { echo "windows: no Linux kpack at $linux_kpack to compare with" >&2; exit 1; }
scripts/windows-cli.sh "$out/kpack.exe" "$linux_kpack"
# The PE fixture DLLs transformed by kpack.exe, loaded by a Windows program through a stand-in
# HIP runtime on rocm_kpack.dll: every code object byte for byte the original's.
scripts/windows-e2e.sh "$out" "$linux_kpack"

# A C program through the header's dllimport declarations and each import library, under wine.
smoke=$(mktemp -d)
trap 'rm -rf "$smoke"' EXIT
cp "$out/rocm_kpack.dll" "$smoke/"
for implib in librocm_kpack.dll.a rocm_kpack.lib; do
  x86_64-w64-mingw32-gcc -O1 -Icrates/kpack-capi/include -o "$smoke/smoke.exe" \
    crates/kpack-capi/tests/c/windows_smoke.c "$out/$implib"
  (cd "$smoke" && "$CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER" smoke.exe "$(winepath -w "$OLDPWD/fixtures/vectors/test_zstd.kpack" 2>/dev/null)") |
    tr -d '\r' | sed "s/^/windows: $implib: /"
done
