#!/usr/bin/env bash
# The C library's Windows install layout (issue 37, item 2), under wine: install-rocm-kpack.exe
# (kpack-capi-install built for x86_64-pc-windows-gnu) installs into a temporary prefix; the
# check is that the prefix holds bin/rocm_kpack.dll, the import libraries in lib/
# (librocm_kpack.dll.a for MinGW, rocm_kpack.lib for MSVC), the header and the CMake package,
# and nothing of the Linux layout (no lib/librocm_kpack.so*); that the CMake package gives
# rocm::rocm_kpack the DLL as IMPORTED_LOCATION and the MinGW import library as
# IMPORTED_IMPLIB; and that a C program configured by CMake with the MinGW compilers through
# find_package(rocm-kpack) builds against the installed files and runs under wine with the
# installed DLL (crates/kpack-capi/tests/c/windows_smoke.c). Run by scripts/windows.sh after it
# built install-rocm-kpack.exe (`cargo build … -p kpack-capi-install`, which builds
# rocm_kpack.dll and its libraries beside it) and made rocm_kpack.lib in OUT:
#
#   scripts/windows-install.sh OUT     (OUT: the Windows build's output directory, as windows-e2e.sh's)
#
# Prints one line per check and a closing line in cargo's form, which scripts/test.sh counts.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath "$1")
# shellcheck source=scripts/windows-checks.sh
. scripts/windows-checks.sh
for f in install-rocm-kpack.exe rocm_kpack.lib; do
  [ -f "$out/$f" ] || { echo "windows-install: no $out/$f (scripts/windows.sh makes it)" >&2; exit 1; }
done
prefix=$work/prefix
problem=
"$runner" "$out/install-rocm-kpack.exe" --prefix "$(winpath "$prefix")" \
  >"$work/install.log" 2>&1 || problem="install-rocm-kpack.exe failed: $(head -c 2000 "$work/install.log")"
report windows-install "install-rocm-kpack.exe --prefix under wine" "$problem"

problem=
for f in bin/rocm_kpack.dll lib/librocm_kpack.dll.a lib/rocm_kpack.lib lib/librocm_kpack.a \
  include/rocm_kpack/kpack.h lib/cmake/rocm-kpack/rocm-kpack-config.cmake \
  lib/cmake/rocm-kpack/rocm-kpack-config-version.cmake lib/pkgconfig/rocm-kpack.pc; do
  [ -f "$prefix/$f" ] || problem="$problem no $f;"
done
for f in "$prefix"/lib/librocm_kpack.so* "$prefix"/bin/*.so*; do
  [ ! -e "$f" ] || problem="$problem ${f#"$prefix"/} (the Linux layout);"
done
cmp -s "$prefix/bin/rocm_kpack.dll" "$out/rocm_kpack.dll" || problem="$problem bin/rocm_kpack.dll is not the built DLL;"
report windows-install "the layout: bin/rocm_kpack.dll, lib/ import libraries, header, CMake" "$problem"

# A consumer project: what the CMake package says, and a program built through it.
mkdir "$work/consumer"
cp crates/kpack-capi/tests/c/windows_smoke.c "$work/consumer/"
cat >"$work/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(rocm-kpack 0.1 REQUIRED)
get_target_property(location rocm::rocm_kpack IMPORTED_LOCATION)
get_target_property(implib rocm::rocm_kpack IMPORTED_IMPLIB)
file(WRITE "${CMAKE_BINARY_DIR}/imported.txt" "${location}\n${implib}\n")
add_executable(smoke windows_smoke.c)
target_link_libraries(smoke PRIVATE rocm::rocm_kpack)
CMAKE
problem=
if ! cmake -S "$work/consumer" -B "$work/build" -DCMAKE_SYSTEM_NAME=Windows \
  -DCMAKE_C_COMPILER=x86_64-w64-mingw32-gcc -DCMAKE_RC_COMPILER=x86_64-w64-mingw32-windres \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1; then
  problem="cmake could not configure it: $(tail -20 "$work/cmake.log")"
elif [ "$(cat "$work/build/imported.txt")" != "$(printf '%s\n' "$prefix/bin/rocm_kpack.dll" "$prefix/lib/librocm_kpack.dll.a")" ]; then
  problem="IMPORTED_LOCATION and IMPORTED_IMPLIB are $(tr '\n' ' ' <"$work/build/imported.txt")"
fi
report windows-install "the CMake package: IMPORTED_LOCATION the DLL, IMPORTED_IMPLIB librocm_kpack.dll.a" "$problem"

problem=
vector=$(winpath fixtures/vectors/test_zstd.kpack)
if ! cmake --build "$work/build" >"$work/build.log" 2>&1; then
  problem="the build failed: $(tail -20 "$work/build.log")"
elif ! WINEPATH=$(winpath "$prefix/bin") "$runner" "$work/build/smoke.exe" "$vector" \
  >"$work/smoke.log" 2>&1; then
  problem="smoke.exe failed: $(head -c 2000 "$work/smoke.log")"
fi
report windows-install "a C program through find_package(rocm-kpack), run with bin/rocm_kpack.dll" "$problem"

close "rocm_kpack installed for Windows"
