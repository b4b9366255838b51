#!/usr/bin/env bash
# Builds the Python package's win_amd64 wheel (abi3: one wheel for every CPython >= 3.9 on
# 64-bit Windows) into target/wheels-windows, cross-built for x86_64-pc-windows-gnu with the
# Windows toolchain (scripts/windows-toolchain.sh: sid's rustc with -Zbuild-std, mingw-w64),
# and checks it (issue 37, item 5): its name and WHEEL tags (`cp39-abi3-win_amd64`), and that
# it holds the native module `kpack/_native.pyd` (a PE32+ x86-64 DLL exporting
# `PyInit__native` and importing only python3.dll of Python: the stable ABI), the `kpack`
# command as the wheel's data script `kpack.exe` (a PE32+ x86-64 program), the Python
# packages `kpack` and `rocm_kpack`, and a RECORD whose every line's SHA-256 and size are
# the member's, every member listed once. Prints one line per check and a closing line in
# cargo's form (scripts/windows-checks.sh), which scripts/test.sh counts.
#
# Installing and importing it needs a Windows CPython (python.org's installer, or its
# embeddable zip, under wine), which these machines cannot fetch: the wheel is built and its
# contents checked, not run (docs/python.md).
#
# No import library of python3.dll is needed: PyO3 0.30 links it by `raw-dylib` (PyO3#5866;
# its `generate-import-lib` feature, which older PyO3 needed for this cross-build, is
# deprecated). The `kpack.exe` data script is built as scripts/wheel.sh builds the Linux
# wheel's `kpack`, into the data directory pyproject.toml names, before maturin runs (no zig
# here: MinGW links both); scripts/windows.sh then tests that kpack.exe, the one the wheel
# ships, under wine.
set -euo pipefail
cd "$(dirname "$0")/.."
export KPACK_CORPUS=${KPACK_CORPUS:-/var/tmp/kpack-corpus}
PY_TOOLS=${KPACK_PY_TOOLS:-/var/tmp/kpack-pytools}
[ -f "$KPACK_CORPUS/rustwin/env.sh" ] || scripts/windows-toolchain.sh
# shellcheck source=/dev/null
. "$KPACK_CORPUS/rustwin/env.sh"
TARGET=x86_64-pc-windows-gnu
data=target/wheel/kpack.data/scripts
wheels=target/wheels-windows
rm -rf "$data" "$wheels"
mkdir -p "$data"
cargo build --profile windows-ci --quiet -Zbuild-std=std,panic_abort --target "$TARGET" \
  -p kpack-cli -p kpack-python --bin kpack
x86_64-w64-mingw32-strip -o "$data/kpack.exe" "$CARGO_TARGET_DIR/$TARGET/windows-ci/kpack.exe"
# The platform tag is the target's (win_amd64; maturin ignores pyproject.toml's manylinux
# compatibility for other systems); `pypi`: only tags PyPI accepts.
PATH="$PY_TOOLS/bin:$PATH" maturin build --profile windows-ci --target "$TARGET" \
  -Z build-std=std,panic_abort --compatibility pypi --target-dir "$CARGO_TARGET_DIR" \
  --out "$wheels"
rm -rf "$data"

# shellcheck source=scripts/windows-checks.sh
. scripts/windows-checks.sh
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
shopt -s nullglob
found=("$wheels"/*.whl)
wheel="$wheels/kpack-$version-cp39-abi3-win_amd64.whl"
problem=
[ "${found[*]}" = "$wheel" ] || problem="built ${found[*]:-nothing}, not $wheel"
report windows-wheel "one wheel, named kpack-$version-cp39-abi3-win_amd64.whl" "$problem"
[ -z "$problem" ] || { close "the win_amd64 wheel"; exit 1; }

unzip -q "$wheel" -d "$work/wheel"
dist=$work/wheel/kpack-$version.dist-info
problem=
grep -qx "Tag: cp39-abi3-win_amd64" "$dist/WHEEL" || problem="WHEEL tags: $(grep '^Tag' "$dist/WHEEL")"
grep -qx "Root-Is-Purelib: false" "$dist/WHEEL" || problem="$problem; not Root-Is-Purelib: false"
report windows-wheel "WHEEL says cp39-abi3-win_amd64, platform-specific" "$problem"

# pe_check FILE WHAT: FILE is a PE32+ image for x86-64 (objdump's own reading of it).
pe_check() {
  local format
  format=$(x86_64-w64-mingw32-objdump -f "$1" 2>&1 | sed -n 's/.*file format //p')
  [ "$format" = pei-x86-64 ] || echo "$2 is not a PE32+ x86-64 image: ${format:-unreadable}"
}
pyd=$work/wheel/kpack/_native.pyd
problem=$(pe_check "$pyd" kpack/_native.pyd)
if [ -z "$problem" ]; then
  dump=$(x86_64-w64-mingw32-objdump -p "$pyd")
  grep -q "PyInit__native" <<<"$dump" || problem="kpack/_native.pyd does not export PyInit__native"
  pythons=$(sed -n 's/^\s*DLL Name: \(python.*\)/\1/p' <<<"$dump" | sort -u | tr '\n' ' ')
  [ "$pythons" = "python3.dll " ] || problem="$problem; it imports ${pythons:-no Python}, not python3.dll alone"
fi
report windows-wheel "kpack/_native.pyd: PE32+ x86-64, PyInit__native, python3.dll (abi3)" "$problem"

exe=$work/wheel/kpack-$version.data/scripts/kpack.exe
problem=
[ -f "$exe" ] || problem="no kpack-$version.data/scripts/kpack.exe"
[ -n "$problem" ] || problem=$(pe_check "$exe" kpack.exe)
[ -n "$problem" ] || grep -q "Subsystem.*(Windows CUI)" <<<"$(x86_64-w64-mingw32-objdump -p "$exe")" ||
  problem="kpack.exe is not a console program"
report windows-wheel "the kpack command: the data script kpack.exe, a PE32+ console program" "$problem"

problem=
for f in kpack/__init__.py kpack/_command.py kpack/__main__.py kpack/py.typed rocm_kpack/__init__.py; do
  [ -f "$work/wheel/$f" ] || problem="$problem no $f;"
done
report windows-wheel "the Python packages kpack and rocm_kpack" "$problem"

# RECORD: every member once, each line's hash and size the member's (RECORD's own line
# empty), read by Python's zipfile and hashlib, not by kpack.
problem=$("$PY_TOOLS/bin/python" - "$wheel" "kpack-$version.dist-info/RECORD" <<'PY'
import base64, csv, hashlib, io, sys, zipfile
wheel, record_name = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    members = [i.filename for i in z.infolist() if not i.is_dir()]
    rows = list(csv.reader(io.TextIOWrapper(z.open(record_name), "utf-8")))
    problems, listed = [], [r[0] for r in rows]
    if sorted(listed) != sorted(members):
        problems.append(f"RECORD lists {sorted(set(listed) ^ set(members))} differently from the zip")
    for path, digest, size in rows:
        if path == record_name:
            if digest or size:
                problems.append("RECORD's own line has a hash")
            continue
        data = z.read(path)
        want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        if digest != want or size != str(len(data)):
            problems.append(f"{path}: RECORD says {digest},{size}; the member is {want},{len(data)}")
print("; ".join(problems))
PY
)
report windows-wheel "RECORD: every member once, hashes and sizes valid" "$problem"

close "the win_amd64 wheel"
