#!/usr/bin/env bash
# Installs what the test suite needs on Debian bookworm, idempotently, and fetches the
# real-world corpus (bookworm's librocsparse0, PyPI jax-rocm7-plugin wheels, Debian ROCm 7.2.4
# librocblas5/libhipblaslt1/libhipsparselt0 kernel databases) into
# $KPACK_CORPUS (default /var/tmp/kpack-corpus; same layout as shared/corpus/fetch_corpus.sh).
set -euo pipefail
CORPUS=${KPACK_CORPUS:-/var/tmp/kpack-corpus}
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo

# clang-tools-15: clang-offload-bundler-15, the independent witness for unbundling.
# binutils/elfutils/patchelf: readelf, objcopy, eu-elflint, patchelf as witnesses for ELF output.
# gcc, cmake, pkg-config: the C stand-ins and the C API's CMake package test.
# chromium, fonts-dejavu-core: the `kpack report` page rendered headless and screenshotted.
PKGS="clang-tools-15 binutils elfutils patchelf zstd gcc cmake pkg-config unzip chromium fonts-dejavu-core"
# pip downloads the PyPI wheels of the corpus.
python3 -m pip --version >/dev/null 2>&1 || PKGS="$PKGS python3-pip"
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
  # The package lists may never have been fetched on a machine that had the tools already.
  (cd "$CORPUS/debs" && apt-get download -q librocsparse0=5.3.0+dfsg-2 >/dev/null 2>&1) ||
    { $SUDO apt-get update -qq && (cd "$CORPUS/debs" && apt-get download -q librocsparse0=5.3.0+dfsg-2); }
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
# Split/recombine real-world tier: Debian ROCm 7.2.4 kernel databases with their fat libraries
# (experimental librocblas5, libhipblaslt1; libhipsparselt0), fetched with a private apt
# configuration for trixie/sid/experimental (nothing is installed system-wide).
ROCM_DEBS="librocblas5=7.2.4-1~exp1 libhipblaslt1=7.2.4+dfsg-1~exp1 libhipsparselt0=7.2.4+ds-1~exp1"
need_debs=
for spec in $ROCM_DEBS; do
  pkg=${spec%%=*}
  ls -d "$CORPUS"/x/"${pkg}"_7.2.4* >/dev/null 2>&1 || need_debs="$need_debs $spec"
done
if [ -n "$need_debs" ]; then
  echo "setup: fetching$need_debs"
  A="$CORPUS/apt"
  mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/etc/sources.list.d" "$A/etc/preferences.d"
  MIRROR=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
  [ -n "$MIRROR" ] || MIRROR=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; exit } }' /etc/apt/sources.list 2>/dev/null)
  [ -n "$MIRROR" ] || { echo "setup: no Debian mirror in this machine's apt sources" >&2; exit 1; }
  for suite in trixie sid experimental; do
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $suite main"
  done > "$A/etc/sources.list"
  cat > "$A/apt.conf" <<EOF
Dir::State "$A";
Dir::State::Lists "$A/lists";
Dir::State::status "$A/status";
Dir::Cache "$A/cache";
Dir::Etc::SourceList "$A/etc/sources.list";
Dir::Etc::SourceParts "$A/etc/sources.list.d";
Dir::Etc::Preferences "$A/etc/preferences";
Dir::Etc::PreferencesParts "$A/etc/preferences.d";
APT::Architecture "amd64";
Acquire::Languages "none";
EOF
  touch "$A/status"
  APT_CONFIG="$A/apt.conf" apt-get update -qq
  for spec in $need_debs; do
    # Pinned versions first; sid/experimental move, so fall back to the current candidate.
    (cd "$CORPUS/debs" && APT_CONFIG="$A/apt.conf" apt-get download -q "$spec" >/dev/null 2>&1) || {
      echo "setup: $spec not available any more; taking the current ${spec%%=*}" >&2
      (cd "$CORPUS/debs" && APT_CONFIG="$A/apt.conf" apt-get download -q "${spec%%=*}")
    }
  done
fi
for d in "$CORPUS"/debs/librocblas5_*.deb "$CORPUS"/debs/libhipblaslt1_*.deb "$CORPUS"/debs/libhipsparselt0_*.deb; do
  [ -f "$d" ] || continue
  n=$(basename "$d" .deb); n=${n%_amd64}; n=${n%_all}
  [ -d "$CORPUS/x/$n" ] || { mkdir -p "$CORPUS/x/$n" && dpkg-deb -x "$d" "$CORPUS/x/$n"; }
done
echo "setup: ready (corpus in $CORPUS)"
