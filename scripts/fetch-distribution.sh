#!/usr/bin/env bash
# Fetches the Debian ROCm 7.2.4 packages that carry device code and lays each one out as a
# TheRock shard artifact, one component per package: `$DIST/shard/<package>_generic.tar.zst`
# (the `generic` family, as TheRock's fat build names it), holding `artifact_manifest.txt` and
# the package's tree under the prefix `<source package>/stage` (so `/usr/lib/...` installs
# as in Debian). `$DIST/meta/<package>.info` records the package, version, .deb bytes, files
# and installed bytes (the "fat install" of the benchmark).
#
#   scripts/fetch-distribution.sh            every package below (about 6.6 GB of .debs)
#   scripts/fetch-distribution.sh --slice    only what scripts/setup.sh already fetched
#                                            (the corpus' extracted 7.2.4 trees; no download)
#
# $KPACK_DISTRO (default /var/tmp/kpack-distro) holds everything. Debian's own packages, from
# a private apt configuration for trixie/sid/experimental in $KPACK_DISTRO/apt (nothing is
# installed system-wide; same as scripts/setup.sh). Idempotent: a package whose artifact was
# made from the same .deb is skipped; a .deb is deleted once laid out (KPACK_DISTRO_KEEP_DEBS=1
# keeps them), and a tree that scripts/setup.sh already extracted into $KPACK_CORPUS/x is
# used instead of downloading its .deb.
set -euo pipefail
DIST=$(realpath -m "${KPACK_DISTRO:-/var/tmp/kpack-distro}")
CORPUS=$(realpath -m "${KPACK_CORPUS:-/var/tmp/kpack-corpus}")
SLICE=0
[ "${1:-}" = --slice ] && SLICE=1

# The packages, chosen by looking at every ROCm 7.2.4 binary package of sid/experimental that
# depends on libamdhip64-7 or ships kernel databases (`kpack inspect`, `readelf -S`): each holds
# fat binaries (`.hip_fatbin`) or kernel-database files (`.co`/`.hsaco`/`.dat`, MIOpen's
# `.model`). Left out: librocsolver0 (on purpose), the -dev and -doc packages, and those
# without device code: libMIOpen.so (libmiopen1 compiles its kernels at run time),
# librocalution1(-tests), librccl1-tests, libhipblas3, libhipsolver1, libhipfft0(w),
# libhiprand1, libhipsparse4, libamdhip64-7, libhsa-runtime64-1 and the *-tests-data
# packages of rocBLAS, hipBLAS, hipBLASLt, rocSPARSE and hipSOLVER (test matrices).
LIBS="librocblas5 libhipblaslt1 libhipsparselt0 librocsparse1 librocfft0 librocrand1 librccl1
  libmiopen-tests-data"
# The -tests and -bench packages whose split finds device code. libhsa-runtime64-tests ships
# per-GPU code objects in `<arch>/` directories, which no database handler claims: they stay
# in the generic artifact. Left out, their split finding none (they link the libraries'
# device code): hipsparselt-tests, libhipblas3-tests/-bench, libhipsolver1-tests,
# libhipsparse4-tests, libmiopen1-tests, librocsolver0-tests/-bench, librocsparse1-tests,
# librccl1-tests, librocalution1-tests.
TESTS="librocblas5-tests librocblas5-bench libhipblaslt1-tests libhipblaslt1-bench librocfft0-tests
  librocrand1-tests libhipfft0-tests libhiprand1-tests libhsa-runtime64-tests librocprim-tests
  libhipcub-tests librocthrust-tests librocwmma-tests librocwmma-tests-validate"
# The CI slice: trees scripts/setup.sh has extracted (a CCOB library of 319 bundles, and a fat
# library with its kernel database).
SLICE_PKGS="libhipsparselt0 librocsparse1"
PKGS="$LIBS $TESTS"
[ $SLICE = 1 ] && PKGS=$SLICE_PKGS

mkdir -p "$DIST/shard" "$DIST/meta" "$DIST/debs" "$DIST/tmp"

A="$DIST/apt"
. "$(dirname "$0")/private-apt.sh"
# As root, apt would warn that its sandbox user cannot write the download directory.
SANDBOX=; [ "$(id -u)" = 0 ] && SANDBOX="-o APT::Sandbox::User=root"
aptc() { APT_CONFIG="$A/apt.conf" "$@"; }

# Lays out the tree $3 of package $1 (version $2, source $4, .deb bytes $5) as its artifact.
layout() {
  local pkg=$1 ver=$2 tree=$3 src=$4 debbytes=$5 prefix="$4/stage" out="$DIST/shard/${1}_generic.tar.zst"
  local w="$DIST/tmp/$pkg.art"
  rm -rf "$w" && mkdir -p "$w"
  printf '%s\n' "$prefix" > "$w/artifact_manifest.txt"
  touch -d @0 "$w/artifact_manifest.txt"
  # Reproducible: sorted, numeric owner 0, the package's mtimes kept.
  tar --sort=name --owner=0 --group=0 --numeric-owner --transform "s,^\.\$,$prefix,S" \
    --transform "s,^\./,$prefix/,S" -cf - \
    -C "$w" artifact_manifest.txt -C "$tree" . | zstd -q -T0 -3 -f -o "$out.tmp"
  local stats
  stats=$(find -P "$tree/" -type f -printf '%s\n' | awk '{ n++; s += $1 } END { print n + 0, s + 0 }')
  mv -f "$out.tmp" "$out"
  printf '%s %s %s %s %s %s\n' "$pkg" "$ver" "$src" "$debbytes" $stats > "$DIST/meta/$pkg.info"
  rm -rf "$w"
}

if [ $SLICE = 0 ]; then
  private_apt "$A" amd64 trixie sid experimental
  # Artifacts of packages no longer in the list go (the benchmark runs on every artifact here).
  for f in "$DIST"/shard/*_generic.tar.zst; do
    [ -e "$f" ] || continue
    n=${f##*/}; n=${n%_generic.tar.zst}
    case " $(echo $PKGS) " in *" $n "*) ;; *) echo "fetch-distribution: dropping $n"; rm -f "$f" "$DIST/meta/$n.info" ;; esac
  done
fi
for pkg in $PKGS; do
  if [ $SLICE = 1 ]; then
    tree=$(ls -d "$CORPUS"/x/"${pkg}"_7.2.4* 2>/dev/null | head -n 1)
    [ -n "$tree" ] || { echo "fetch-distribution: $pkg not in $CORPUS/x; run scripts/setup.sh" >&2; exit 1; }
    ver=${tree##*/"${pkg}"_}
    [ "$(cut -d' ' -f2 "$DIST/meta/$pkg.info" 2>/dev/null)" = "$ver" ] && [ -f "$DIST/shard/${pkg}_generic.tar.zst" ] && continue
    deb=$(ls "$CORPUS"/debs/"${pkg}"_"${ver}"_*.deb 2>/dev/null | head -n 1)
    src=$(dpkg-deb -f "$deb" Source 2>/dev/null | cut -d' ' -f1)
    [ -n "$src" ] || src=$pkg
    echo "fetch-distribution: $pkg $ver (from $tree)"
    layout "$pkg" "$ver" "$tree/" "$src" "$(stat -c %s "$deb" 2>/dev/null || echo 0)"
    continue
  fi
  # Version 7.2.4 where Debian has it (the highest such), else the candidate.
  ver=$(aptc apt-cache madison "$pkg" | awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | grep -m1 '^7\.2\.4' || true)
  if [ -z "$ver" ]; then
    ver=$(aptc apt-cache policy "$pkg" | awk '/Candidate:/ { print $2 }')
    echo "fetch-distribution: $pkg has no 7.2.4 version; taking $ver" >&2
  fi
  [ "$(cut -d' ' -f2 "$DIST/meta/$pkg.info" 2>/dev/null)" = "$ver" ] && [ -f "$DIST/shard/${pkg}_generic.tar.zst" ] && continue
  show=$(aptc apt-cache show "$pkg=$ver")
  src=$(printf '%s\n' "$show" | sed -n 's/^Source: *\([^ ]*\).*/\1/p' | head -n 1)
  [ -n "$src" ] || src=$pkg
  file=$(printf '%s\n' "$show" | sed -n 's/^Filename: *//p' | head -n 1)
  file=${file##*/}
  tree=$(ls -d "$CORPUS/x/${pkg}_${ver}" 2>/dev/null || true)
  if [ -n "$tree" ]; then
    echo "fetch-distribution: $pkg $ver (from $tree)"
    layout "$pkg" "$ver" "$tree/" "$src" "$(stat -c %s "$CORPUS/debs/$file" 2>/dev/null || echo 0)"
    continue
  fi
  deb="$DIST/debs/$file"
  if [ ! -f "$deb" ]; then
    echo "fetch-distribution: downloading $pkg $ver"
    (cd "$DIST/debs" && aptc apt-get download -q $SANDBOX "$pkg=$ver" >/dev/null)
  fi
  echo "fetch-distribution: $pkg $ver"
  x="$DIST/tmp/$pkg.x"
  rm -rf "$x" && mkdir -p "$x"
  dpkg-deb -x "$deb" "$x"
  layout "$pkg" "$ver" "$x/" "$src" "$(stat -c %s "$deb")"
  rm -rf "$x"
  [ "${KPACK_DISTRO_KEEP_DEBS:-0}" = 1 ] || rm -f "$deb"
done
echo "fetch-distribution: $(ls "$DIST"/shard/*_generic.tar.zst | wc -l) artifacts in $DIST/shard ($(du -sh "$DIST/shard" | cut -f1))"
