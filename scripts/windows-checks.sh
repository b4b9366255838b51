# Sourced by scripts/windows-cli.sh and scripts/windows-e2e.sh: what both do around their
# checks under wine. Sets `runner` (cargo's wine runner, from $KPACK_CORPUS/rustwin/env.sh)
# and `work` (a directory removed on exit); `report PREFIX NAME PROBLEM` counts a check,
# passed when PROBLEM is empty, and prints its line; `close WHAT` prints the closing line in
# cargo's form (`test result: ok. N passed; 0 failed`), which scripts/test.sh counts, and
# fails when a check did. `winpath PATH` is PATH as Windows programs under wine name it.
runner=${CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER:?". \$KPACK_CORPUS/rustwin/env.sh first"}
# The prefix's Z: drive is / (wine's default): a path's Windows name is Z: and the path with
# backslashes. Spelled here rather than asked of `winepath`, which starts wine for every
# path (a second each) and, should that fail, prints nothing: an empty path, and a check
# failing far from the cause.
[ "$(readlink "${WINEPREFIX:-$HOME/.wine}/dosdevices/z:")" = / ] ||
  { echo "windows: the wine prefix's Z: drive is not /" >&2; exit 1; }
winpath() {
  case $1 in
  /*) printf 'Z:%s\n' "${1//\//\\}" ;;
  *) winpath "$PWD/$1" ;;
  esac
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

report() {
  if [ -z "$3" ]; then
    passed=$((passed + 1))
    echo "$1: $2 ... ok"
  else
    failed=$((failed + 1))
    echo "$1: $2 ... FAILED: $3"
  fi
}

close() {
  local result=ok
  [ "$failed" = 0 ] || result=FAILED
  echo "test result: $result. $passed passed; $failed failed ($1)"
  [ "$failed" = 0 ]
}
