#!/usr/bin/env bash
# kpack.exe under wine against the Linux kpack (issue 37, acceptance: `--version`, `transform`,
# `split`, `verify --original`, `restore` and `inspect --json` work under wine on the PE
# fixtures and on a Linux fixture artifact; a `.tar.zst` split under wine equals one split on
# Linux, byte for byte, its generic artifact with its executables and symbolic link included;
# a closed pipe ends kpack.exe quietly). Run by scripts/windows.sh, which built kpack.exe:
#
#   scripts/windows-cli.sh KPACK_EXE LINUX_KPACK
#
# Each command runs twice with the same arguments, in two directories that start with the same
# inputs: once by the Linux kpack (in linux/), once by kpack.exe under wine (in win/). A check
# passes when both succeed, print the same bytes and leave the two directories holding the
# same files with the same bytes. Arguments are relative paths spelled with `/`, which Windows
# accepts as a separator, so that what is printed (paths in `--json`) can be the same.
#
# The ELF library is fixtures/bin/libone.so (restore reads ELF only). The artifacts are
# fixtures/shards/shard-a/demo_{lib,host}_gfx90X, each packed as a tarball here (GNU tar,
# sorted, mtime 0, owner 0): a tarball carries its members' Unix modes and symbolic links,
# which a directory read from a Windows disk cannot (kpack_fs::mode), so only a tarball
# artifact can give a Windows split the Linux split's bytes. The split carries them from the
# input's members to its output tarballs without the disk (which under wine keeps no execute
# bit and makes no link): split/plan.rs, `recorded`. A recombine of that split carries them
# from its shards' member headers the same way (recombine.rs, `ShardRecords`), with and
# without group archives (which add a link per target).
#
# Prints one line per check and a closing line in cargo's form (`test result: ok. N passed;
# 0 failed`), which scripts/test.sh counts; exits non-zero when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
kpack_exe=$(realpath "$1")
linux_kpack=$(realpath "$2")
# shellcheck source=scripts/windows-checks.sh
. scripts/windows-checks.sh
mkdir -p "$work/in"
cp fixtures/platforms/{hipapp,hipapp2,hipapp_mingw}.dll fixtures/platforms/hipexe.exe "$work/in/"
cp fixtures/bin/libone.so "$work/in/"
for artifact in demo_lib_gfx90X demo_host_gfx90X; do
  tar -C "fixtures/shards/shard-a/$artifact" --sort=name --mtime=@0 --owner=0 --group=0 \
    --numeric-owner -cf - . | zstd -q -o "$work/in/$artifact.tar.zst"
done
cat >"$work/in/recombine.json" <<'JSON'
{"primary_shard": "shard-a",
 "architecture_groups": {"gfx9": {"architectures": ["gfx900", "gfx906", "gfx908", "gfx90a"]}}}
JSON
cp -r "$work/in" "$work/linux"
mv "$work/in" "$work/win"

# check NAME ARGS...: kpack ARGS in linux/ and kpack.exe ARGS in win/, as above. With
# PRINTS_PATHS=1, what they print is not compared (human-readable lines naming paths joined
# by each system's separator, or absolute).
check() {
  local name=$1 problem=
  shift
  if ! (cd "$work/linux" && "$linux_kpack" "$@") >"$work/linux.out" 2>"$work/linux.err"; then
    problem="the Linux kpack failed: $(head -c 2000 "$work/linux.err")"
  elif ! (cd "$work/win" && "$runner" "$kpack_exe" "$@") >"$work/win.out" 2>"$work/win.err"; then
    problem="kpack.exe failed: $(head -c 2000 "$work/win.err")"
  elif [ "${PRINTS_PATHS:-0}" = 0 ] && ! cmp -s "$work/linux.out" "$work/win.out"; then
    problem="their outputs differ: $(diff "$work/linux.out" "$work/win.out" | head -20 || true)"
  elif ! diff -r --no-dereference "$work/linux" "$work/win" >"$work/diff" 2>&1; then
    problem="the files they wrote differ: $(head -20 "$work/diff")"
  fi
  report windows-cli "$name" "$problem"
}

check "--version" --version
check "inspect --json of the PE fixtures" inspect --json hipapp.dll hipapp2.dll hipapp_mingw.dll hipexe.exe
# kpack.exe names outputs for Windows always (a target's `:` spelled `@` in archive names);
# the Linux kpack does when told.
for f in hipapp.dll hipapp2.dll hipapp_mingw.dll hipexe.exe; do
  PRINTS_PATHS=1 check "transform $f" transform --windows-names "$f" -o "kpacked/$f" --kpack-dir kpacked/.kpack
done
check "inspect --json of the transformed fixtures" inspect --json kpacked
# Past MAX_PATH: the output directory alone is 287 characters (std adds the `\\?\` prefix).
deep=$(printf 'a-directory-of-a-long-windows-build-tree/%.0s' 1 2 3 4 5 6 7)
PRINTS_PATHS=1 check "transform into a directory nested past 260 characters" \
  transform --windows-names hipapp.dll -o "${deep}hipapp.dll" --kpack-dir "${deep}.kpack"
# restore reads ELF only: a Linux library, transformed and restored.
PRINTS_PATHS=1 check "transform libone.so" transform --windows-names libone.so -o kpacked/libone.so --kpack-dir kpacked/.kpack
PRINTS_PATHS=1 check "restore libone.so" restore kpacked/libone.so -o libone.restored.so
check "split of a Linux artifact tarball into .tar.zst" \
  split demo_lib_gfx90X.tar.zst --component demo_lib --output-format tar.zst -o shards/shard-a
check "verify --original of that split" verify --json shards/shard-a --original demo_lib_gfx90X.tar.zst
check "recombine of that split into .tar.zst" recombine --json --shards shards \
  --config recombine.json --output-format tar.zst -o recombined
check "recombine of that split into .tar.zst with group archives" recombine --json \
  --shards shards --config recombine.json --output-format tar.zst --group-archives \
  -o recombined-grouped
check "split of a second artifact tarball" \
  split demo_host_gfx90X.tar.zst --component demo_host --output-format tar.zst -o split-host
check "verify --original of the second split" \
  verify --json split-host --original demo_host_gfx90X.tar.zst

# A closed pipe (`kpack.exe inspect … | head`): Windows has no SIGPIPE, a write to a closed
# pipe fails, and kpack.exe must end as the Linux kpack does: silently, status 141 (128 + 13,
# what a shell reports for SIGPIPE). `inspect --json fixtures` prints 270 KB, more than a pipe
# holds, so a write fails.
problem=
set +e
"$runner" "$kpack_exe" inspect --json fixtures 2>"$work/pipe.err" | head -c 100 >/dev/null
status=${PIPESTATUS[0]}
set -e
if [ -s "$work/pipe.err" ]; then
  problem="it printed: $(head -c 2000 "$work/pipe.err")"
elif [ "$status" != 141 ]; then
  problem="its exit status is $status, not 141"
fi
report windows-cli "a closed pipe ends kpack.exe quietly, status 141" "$problem"

close "kpack.exe under wine against the Linux kpack"
