#!/usr/bin/env bash
# A Rust toolchain for x86_64-pc-windows-gnu on Debian bookworm, from Debian packages only, and
# wine to run what it builds (issue 37; the same recipe as the corpus's windows_toolchain.sh, kept
# here so that CI and a newcomer have it). rustup's Windows standard library cannot be
# downloaded here, so the standard library is built from source (cargo -Zbuild-std) by Debian
# sid's rustc, whose rust-src matches it. Idempotent: a second run only rewrites the wrappers.
#
#   scripts/windows-toolchain.sh         installs into $KPACK_CORPUS/rustwin (default /var/tmp/kpack-corpus)
#   . $KPACK_CORPUS/rustwin/env.sh       then, in any checkout (never in a shell that also builds for Linux:
#                                        it sets RUSTC to sid's rustc):
#   cargo build --release -Zbuild-std=std,panic_abort --target x86_64-pc-windows-gnu -p kpack-capi
#   cargo test  --release -Zbuild-std=std,panic_abort --target x86_64-pc-windows-gnu -p kpack-target  (runs under wine)
#
# What it does:
#   - sid's rustc, its libstd, rust-src and the libraries rustc needs (glibc 2.4x, libLLVM) unpacked
#     into a private root and run through that root's own ld.so (the system's glibc is untouched);
#     cargo stays rustup's;
#   - apt: gcc-mingw-w64-x86-64 (linker, C compiler for zstd-sys and the C test programs, dlltool),
#     wine, wine64;
#   - a wine prefix with a 5-line bcryptprimitives.dll: Rust's Windows std imports ProcessPrng from
#     it, which wine 8 (bookworm) lacks; the stand-in calls RtlGenRandom (advapi32). Real Windows
#     has the DLL.
set -euo pipefail
CORPUS=${KPACK_CORPUS:-/var/tmp/kpack-corpus}
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
W="$CORPUS/rustwin"; R="$W/root"

missing=
for p in gcc-mingw-w64-x86-64 wine wine64; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "windows-toolchain: installing$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

if [ ! -x "$R/usr/bin/rustc" ]; then
  echo "windows-toolchain: fetching sid's rustc and rust-src into $R"
  # private_apt: a private apt configuration (nothing installed system-wide).
  . "$(dirname "$0")/private-apt.sh"
  private_apt "$W/apt" amd64 sid
  xapt() { APT_CONFIG="$W/apt/apt.conf" "$@"; }
  ver=$(xapt apt-cache policy rustc | sed -n 's/^ *Candidate: *\([0-9]*\.[0-9]*\).*/\1/p')
  [ -n "$ver" ] || { echo "windows-toolchain: no rustc in sid" >&2; exit 1; }
  llvm=$(xapt apt-cache depends "libstd-rust-$ver" | sed -n 's/^ *Depends: *\(libllvm[0-9]*\).*/\1/p' | head -n 1)
  icu=$(xapt apt-cache depends "libxml2-16" | sed -n 's/^ *Depends: *\(libicu[0-9]*\).*/\1/p' | head -n 1)
  rm -rf "$W/debs" "$R.tmp"
  mkdir -p "$W/debs" "$R.tmp"
  (cd "$W/debs" && for p in rustc "libstd-rust-$ver" libstd-rust-dev rust-src "$llvm" libc6 libstdc++6 libgcc-s1 \
      libzstd1 zlib1g libffi8 libedit2 libtinfo6 libxml2-16 "$icu" libbsd0 libmd0 libz3-4 liblzma5; do
    [ -n "$p" ] && xapt apt-get download -qq "$p"
  done)
  for d in "$W"/debs/*.deb; do dpkg-deb -x "$d" "$R.tmp"; done
  # The root appears whole or not at all: a killed run fetches again.
  rm -rf "$R"
  mv "$R.tmp" "$R"
fi
cat > "$W/rustc" <<EOF
#!/bin/sh
exec $R/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path $R/usr/lib/x86_64-linux-gnu $R/usr/bin/rustc "\$@"
EOF
chmod +x "$W/rustc"

# The wine prefix with the ProcessPrng stand-in.
export WINEPREFIX="$W/wineprefix" WINEDEBUG=-all
if [ ! -f "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" ]; then
  echo "windows-toolchain: making the wine prefix $WINEPREFIX"
  wineboot -i >/dev/null 2>&1 || true
  cat > "$W/bcryptprimitives.c" <<'EOF'
#include <windows.h>
BOOLEAN NTAPI SystemFunction036(PVOID buffer, ULONG length); /* RtlGenRandom */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) { return SystemFunction036(data, (ULONG)len); }
EOF
  x86_64-w64-mingw32-gcc -shared -O2 -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" "$W/bcryptprimitives.c" -ladvapi32
fi
cat > "$W/wine-run" <<EOF
#!/bin/sh
# cargo's runner for x86_64-pc-windows-gnu: the program under wine, its exit status passed on
WINEPREFIX=$WINEPREFIX WINEDEBUG=-all WINEDLLOVERRIDES=bcryptprimitives=n exec wine "\$@"
EOF
chmod +x "$W/wine-run"
cat > "$W/env.sh" <<EOF
# . this file: cargo then builds and runs x86_64-pc-windows-gnu with -Zbuild-std
export RUSTC=$W/rustc RUSTC_BOOTSTRAP=1
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=$W/wine-run
export CC_x86_64_pc_windows_gnu=x86_64-w64-mingw32-gcc AR_x86_64_pc_windows_gnu=x86_64-w64-mingw32-ar
export WINEPREFIX=$WINEPREFIX
# a target directory of its own: sid's rustc and rustup's do not share build artifacts
export CARGO_TARGET_DIR=\${CARGO_TARGET_DIR:-target/windows}
EOF
echo "windows-toolchain: $("$W/rustc" --version); . $W/env.sh"
