# Sourced by scripts/setup.sh and scripts/fetch-distribution.sh.
#
# private_apt DIR ARCH SUITE...: a private apt configuration in DIR for architecture ARCH and
# the suites SUITE... of this machine's Debian mirror (nothing is installed system-wide), its
# package lists updated unless fetched less than a day ago; its apt.conf is DIR/apt.conf.
private_apt() {
  local A=$1 arch=$2 MIRROR suite; shift 2
  mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$A/etc/sources.list.d" "$A/etc/preferences.d"
  MIRROR=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
  [ -n "$MIRROR" ] || MIRROR=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; exit } }' /etc/apt/sources.list 2>/dev/null)
  [ -n "$MIRROR" ] || { echo "private_apt: no Debian mirror in this machine's apt sources" >&2; exit 1; }
  for suite in "$@"; do
    echo "deb [arch=$arch signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $suite main"
  done > "$A/etc/sources.list.new"
  # Lists of other suites or of another architecture are fetched again whatever their age.
  cmp -s "$A/etc/sources.list.new" "$A/etc/sources.list" || rm -f "$A"/lists/*Packages*
  mv -f "$A/etc/sources.list.new" "$A/etc/sources.list"
  cat > "$A/apt.conf" <<EOF
Dir::State "$A";
Dir::State::Lists "$A/lists";
Dir::State::status "$A/status";
Dir::Cache "$A/cache";
Dir::Etc::SourceList "$A/etc/sources.list";
Dir::Etc::SourceParts "$A/etc/sources.list.d";
Dir::Etc::Preferences "$A/etc/preferences";
Dir::Etc::PreferencesParts "$A/etc/preferences.d";
APT::Architecture "$arch";
APT::Architectures { "$arch"; };
Acquire::Languages "none";
EOF
  touch "$A/status"
  if [ -z "$(find "$A/lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null)" ]; then
    APT_CONFIG="$A/apt.conf" apt-get update -qq
  fi
}
