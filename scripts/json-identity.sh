#!/usr/bin/env bash
# Proves a change leaves every command's `--json` output alone: runs the same commands on the
# repo's fixtures with the `kpack` built at BASE (a git revision, default `origin/main` or else
# `HEAD~1`) and with the one built from the working tree, and compares what each prints, byte
# for byte, with its exit status. Restructurings (issue 21) must pass it unchanged.
#
#   scripts/json-identity.sh [BASE]
#
# Both runs use the same scratch paths, so paths inside the JSON agree. Every command that
# reports has a case; a case whose output differs is named with a diff, and the script exits 1.
# BASE is built in a throwaway worktree, into KPACK_IDENTITY_TARGET/base (kept between runs, so a
# second comparison against the same BASE builds only what changed), unless
# KPACK_IDENTITY_BASE_BIN names a `kpack` already built at BASE.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
base=${1:-}
if [ -z "$base" ]; then
  base=$(git rev-parse -q --verify origin/main || git rev-parse HEAD~1)
fi
base=$(git rev-parse "$base^{commit}")
target=${KPACK_IDENTITY_TARGET:-/var/tmp/kpack-identity-target}
work=$(mktemp -d /tmp/kpack-json-identity.XXXXXX)
worktree=$work/base-src
cleanup() {
  git -C "$repo" worktree remove --force "$worktree" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "json-identity: base $(git log -1 --format='%h %s' "$base")"
if [ -n "${KPACK_IDENTITY_BASE_BIN:-}" ]; then
  cp "$KPACK_IDENTITY_BASE_BIN" "$work/kpack-base"
else
  git worktree add -q --detach "$worktree" "$base"
  CARGO_TARGET_DIR=$target/base cargo build -q --release -p kpack-cli --manifest-path "$worktree/Cargo.toml"
  cp "$target/base/release/kpack" "$work/kpack-base"
fi
# The working tree's kpack, built where the rest of the workspace is.
cargo build -q --release -p kpack-cli
cp "${CARGO_TARGET_DIR:-target}/${CARGO_BUILD_TARGET:+$CARGO_BUILD_TARGET/}release/kpack" "$work/kpack-head"


# The cases, one per line: a name, then the arguments after `kpack`. `$F` is the fixtures
# directory, `$S` the scratch directory (emptied before each binary's run, same path for
# both), `$C` the recombine config the map/reduce tests use. Later cases read what earlier ones wrote.
cases() {
  cat <<'EOF'
inspect-bin         inspect --json $F/bin
inspect-modern      inspect --json $F/modern
inspect-offload     inspect --json $F/offload
inspect-spirv       inspect --json $F/spirv
inspect-platforms   inspect --json $F/platforms
inspect-wheel       inspect --json $F/wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl
inspect-tarball     inspect --json $F/tarballs/forms.tar.zst
unbundle            unbundle --json -o $S/unbundled $F/bin/libtwo.so $F/modern/libmodern_v3.so
pack-zstd           pack --json --compression zstd -o $S/pack-zstd.kpack $F/bin/libtwo.so $F/modern/libmodern_v3.so
pack-unified        pack --json --compression unified -o $S/pack-unified.kpack $F/bin/libtwo.so $F/modern/libmodern_v3.so
list                list --json $S/pack-zstd.kpack
recompress          recompress --json --compression unified -o $S/recompressed.kpack $S/pack-zstd.kpack
transform-libtwo    transform --json -o $S/t/libtwo.so --kpack-dir $S/t/.kpack $F/bin/libtwo.so
transform-modern    transform --json -o $S/t/libmodern_v3.so --kpack-dir $S/t/.kpack $F/modern/libmodern_v3.so
transform-unified   transform --json --compression unified -o $S/tu/librdc.so --kpack-dir $S/tu/.kpack $F/bin/librdc.so
transform-spirv     transform --json -o $S/t/libspirv_v3.so --kpack-dir $S/t/.kpack $F/spirv/libspirv_v3.so
transform-pe        transform --json -o $S/t/hipapp.dll --kpack-dir $S/t/.kpack $F/platforms/hipapp.dll
verify-elf          verify-elf --json $S/t/libtwo.so
restore             restore --json -o $S/restored.so --kpack-dir $S/t/.kpack $S/t/libmodern_v3.so
prune-bin           prune --json --keep gfx90a gfx1100 -o $S/pruned $F/bin/libtwo.so $F/modern/libmodern_v3.so
prune-offload       prune --json --keep gfx90a gfx900 -o $S/pruned-offload $F/offload
prune-wheel         prune --json --drop gfx1030 -o $S/pruned-wheel $F/wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl
prune-tarball       prune --json --keep gfx90a gfx900 -o $S/pruned-tarball $F/tarballs/forms.tar.zst
report              report --json $F/bin $F/modern
split-a             split --json --batch --split-databases rocblas -o $S/shards/shard-a $F/shards/shard-a
split-b             split --json --batch --split-databases rocblas -o $S/shards/shard-b $F/shards/shard-b
split-c             split --json --batch --split-databases rocblas -o $S/shards/shard-c $F/shards/shard-c
recombine           recombine --json --shards $S/shards --config $C -o $S/packages
recombine-groups    recombine --json --group-archives --shards $S/shards --config $C -o $S/packages-groups
verify-split        verify --json --original $F/shards/shard-a $S/shards/shard-a
verify-packages     verify --json $S/packages
which               which --json gfx90a $S/packages
verify-recombined   verify --json --original $F/shards $S/packages
split-wheel         split-wheel --json -o $S/wheels $F/wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl
split-wheel-multi   split-wheel --json --multi-target-archives -o $S/wheels-multi $F/wheels/kpack_demo-1.0-py3-none-linux_x86_64.whl
detect-rdna         detect --json --sysfs-root $F/kfd/rdna
detect-mi300x       detect --json --sysfs-root $F/kfd/mi300x
detect-cpu          detect --json --sysfs-root $F/kfd/cpu-only
EOF
}

# Runs every case with the binary $1, keeping stdout and the exit status under $2.
run_all() {
  local kpack=$1 out=$2 S=$work/scratch F=$repo/fixtures C=$repo/fixtures/shards/config.json name args
  rm -rf "$S" && mkdir -p "$S" "$out"
  while read -r name args; do
    eval "set -- $args"
    local status=0
    (cd "$S" && SOURCE_DATE_EPOCH=0 "$kpack" "$@") >"$out/$name.json" 2>"$out/$name.stderr" || status=$?
    echo "$status" >"$out/$name.status"
  done < <(cases)
}

run_all "$work/kpack-base" "$work/base"
run_all "$work/kpack-head" "$work/head"

differ=0
total=0
while read -r name _; do
  total=$((total + 1))
  for part in json status; do
    if ! cmp -s "$work/base/$name.$part" "$work/head/$name.$part"; then
      differ=$((differ + 1))
      echo "json-identity: $name: $part differs" >&2
      diff "$work/base/$name.$part" "$work/head/$name.$part" | head -n 20 >&2 || true
    fi
  done
  # A case must report something, or it proves nothing.
  [ -s "$work/head/$name.json" ] || { echo "json-identity: $name printed nothing:" >&2; cat "$work/head/$name.stderr" >&2; differ=$((differ + 1)); }
done < <(cases)
if [ "$differ" -ne 0 ]; then
  echo "json-identity: $differ difference(s) over $total cases" >&2
  exit 1
fi
echo "json-identity: $total cases, every --json output and exit status identical to $(git rev-parse --short "$base")"
