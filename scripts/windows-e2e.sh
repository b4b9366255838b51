#!/usr/bin/env bash
# kpack end to end on Windows, under wine (issue 37, item 4): each PE fixture DLL of
# fixtures/platforms is transformed by kpack.exe; a Windows program (crates/kpack-capi/tests/c/
# windows_load.c, built with mingw) loads the transformed DLL with LoadLibraryW; its
# constructors register the wrappers with a stand-in HIP runtime, amdhip64.dll
# (crates/kpack-testkit/standin/libamdhip64.c built with KPACK_STANDIN_RUNTIME against
# rocm_kpack.dll, as the Linux end-to-end test builds it against librocm_kpack), which reads
# each wrapper's marker, finds the DLL from the wrapper's address (kpack_discover_binary_path)
# and calls kpack_load_code_object for one target. Every code object it gets must be the one
# the original DLL's bundle holds for that wrapper and target (`kpack unbundle` of the
# original, by the Linux kpack), byte for byte: for every target, once through the marker's
# search path (relative to the DLL's own directory) and once through ROCM_KPACK_PATH naming
# the target's archive, moved where the marker does not lead. Run by scripts/windows.sh:
#
#   scripts/windows-e2e.sh OUT LINUX_KPACK     (OUT: kpack.exe, rocm_kpack.dll, librocm_kpack.dll.a)
#
# Prints one line per load and a closing line in cargo's form, which scripts/test.sh counts;
# exits non-zero when a load fails or differs.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath "$1")
linux_kpack=$(realpath "$2")
# shellcheck source=scripts/windows-checks.sh
. scripts/windows-checks.sh
x86_64-w64-mingw32-gcc -O1 -shared -DKPACK_STANDIN_RUNTIME -Icrates/kpack-capi/include \
  -o "$work/amdhip64.dll" crates/kpack-testkit/standin/libamdhip64.c "$out/librocm_kpack.dll.a"
x86_64-w64-mingw32-gcc -O1 -municode -o "$work/windows_load.exe" \
  crates/kpack-capi/tests/c/windows_load.c

# load DLL TARGET HOW [ROCM_KPACK_PATH]: the transformed DLL loaded for TARGET, each object
# compared with the original's.
load() {
  local dll=$1 target=$2 how=$3 objects="$work/objects" log="$work/log" problem=
  local name
  name=$(basename "$dll")
  rm -rf "$objects" "$log"
  mkdir "$objects"
  (cd "$(dirname "$dll")" && env -u ROCM_KPACK_PATH -u ROCM_KPACK_PATH_PREFIX \
    KPACK_STANDIN_LOG="$(winpath "$log")" KPACK_STANDIN_OBJECTS="$(winpath "$objects")" \
    KPACK_STANDIN_ARCHES="amdgcn-amd-amdhsa--$target" ${4:+"ROCM_KPACK_PATH=$4"} \
    "$runner" windows_load.exe "$name") >"$work/stdout" 2>&1 ||
    problem="windows_load.exe failed: $(head -c 2000 "$work/stdout")"
  [ -n "$problem" ] || [ -f "$log" ] || problem="no wrapper registered"
  [ -z "$problem" ] || : >"$log"
  local n=0 count=0 magic version index rest code want wrappers
  # One registration per wrapper: as many as the original has code objects for TARGET.
  wrappers=$(find "$work/$name.orig" -name "*--$target.co" | wc -l)
  while [ -z "$problem" ] && read -r magic version index rest; do
    code=${rest##* }
    code=${code%$'\r'} # the stand-in's log is a text file: CRLF on Windows
    count=$((count + 1))
    want="$work/$name.orig/$name.$index.hipv4-amdgcn-amd-amdhsa--$target.co"
    if [ "$magic $version" != "HIPK 1" ]; then
      problem="registration $n is $magic $version, not HIPK 1"
    elif [ "$code" != 0 ]; then
      problem="wrapper $index: kpack_load_code_object returned $code $(head -c 2000 "$work/stdout")"
    elif ! cmp -s "$objects/$n.co" "$want"; then
      problem="wrapper $index: the code object differs from the original's ($(stat -c %s "$objects/$n.co" 2>/dev/null || echo no) bytes, not $(stat -c %s "$want" 2>/dev/null || echo none))"
    fi
    n=$((n + 1))
  done <"$log"
  [ -n "$problem" ] || [ "$count" = "$wrappers" ] ||
    problem="$count wrappers registered, not the original's $wrappers"
  report windows-e2e "$name $target by $how ($count code objects)" "$problem"
}

for f in hipapp.dll hipapp2.dll hipapp_mingw.dll; do
  "$linux_kpack" unbundle "fixtures/platforms/$f" -o "$work/$f.orig" >/dev/null 2>&1
  lib="$work/$f.lib"
  mkdir -p "$lib"
  "$runner" "$out/kpack.exe" transform "fixtures/platforms/$f" -o "$lib/$f" \
    --kpack-dir "$lib/.kpack" >/dev/null
  cp "$out/rocm_kpack.dll" "$work/amdhip64.dll" "$work/windows_load.exe" "$lib/"
  group=${f%.dll}
  targets=(gfx1100 gfx942:sramecc+:xnack- gfx11-generic)
  for target in "${targets[@]}"; do
    load "$lib/$f" "$target" "the marker's search path"
  done
  # Moved where the marker does not lead: found only if ROCM_KPACK_PATH is read. Archive
  # names for Windows spell a target's `:` as `@` (docs/platforms.md).
  mv "$lib/.kpack" "$work/$f.moved"
  for target in "${targets[@]}"; do
    load "$lib/$f" "$target" ROCM_KPACK_PATH "$(winpath "$work/$f.moved/${group}_${target//:/@}.kpack")"
  done
done

close "transformed DLLs loaded through rocm_kpack.dll under wine"
