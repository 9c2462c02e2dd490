#!/usr/bin/env bash
# Installs BMv2 (simple_switch_grpc), p4c (p4c-bm2-ss) and PI from p4lang's package
# repository on the openSUSE Build Service (home:p4lang).
#
#   sudo ./scripts/install-bmv2.sh            install (idempotent: nothing to do when the tools are there)
#   ./scripts/install-bmv2.sh --dry-run       say which release this is and which repository it would
#                                             use, or that there is none; change nothing (no root needed)
#   sudo ./scripts/install-bmv2.sh --from-source   Debian 12: build pinned PI, BMv2 and p4c from their
#                                             sources instead (scripts/bmv2-from-source.sh --help)
#
# p4lang publishes these packages for Ubuntu 20.04 and later and for Debian 11. The script
# detects the release from /etc/os-release and says, before it changes anything, which
# repository it will use; when p4lang has none for the release (no such repository, or one
# without these packages) it says so, undoes what it added and exits with status 2. Debian 12
# is tried (Debian_12) with that caveat; the Vagrant VM defaults to Ubuntu 24.04 for this reason.
#
# Exit status: 0 installed (or already there; --dry-run: a repository exists for this release),
# 1 an error (no root, no network, apt failed), 2 no p4lang packages for this release.
#
# Opt-in only: `make setup BMV2=1` and the Vagrant VM call it; nothing else does. Without
# these packages the BMv2 tests skip with a reason and the testbed runs on the Linux SRv6 target.
# MRC_OS_RELEASE=<file> reads another os-release file (for tests of the release detection).
set -euo pipefail

PKGS=(p4lang-pi p4lang-bmv2 p4lang-p4c)
OBS=${P4LANG_OBS_URL:-https://download.opensuse.org/repositories/home:/p4lang}
OS_RELEASE=${MRC_OS_RELEASE:-/etc/os-release}
KEYRING=/etc/apt/keyrings/p4lang.gpg
LIST=/etc/apt/sources.list.d/p4lang.list
DOCUMENTED="Ubuntu 20.04 and later, Debian 11"
ALTERNATIVES="Build pinned versions from source (Debian 12: sudo ./scripts/install-bmv2.sh --from-source,
  about 30 min on 2 cores), use the Vagrant VM (Ubuntu 24.04: cd vagrant && vagrant up), or run the
  testbed on the Linux SRv6 target, which needs neither."

DRY_RUN=0
for arg in "$@"; do
  if [ "$arg" = --from-source ]; then
    exec "$(dirname "$0")/bmv2-from-source.sh" "$@"
  fi
done
case "${1:-}" in
  --dry-run | --check) DRY_RUN=1 ;;
  "") ;;
  -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "install-bmv2: unknown option ${1:0:40} (--dry-run, --from-source, --help)" >&2; exit 1 ;;
esac

die() { echo "install-bmv2: $*" >&2; exit 1; }
none_for_release() {
  echo "install-bmv2: $*" >&2
  echo "  p4lang publishes BMv2/p4c packages for: ${DOCUMENTED}." >&2
  echo "  ${ALTERNATIVES}" >&2
  exit 2
}

if [ "$DRY_RUN" = 0 ] && command -v simple_switch_grpc >/dev/null && command -v p4c-bm2-ss >/dev/null \
  && [ "${FORCE:-0}" != 1 ]; then
  echo "install-bmv2: simple_switch_grpc and p4c-bm2-ss already installed"
  exit 0
fi

# -- which release, which repository ------------------------------------------------------------
[ -r "$OS_RELEASE" ] || die "${OS_RELEASE} missing: cannot tell the distribution"
ID="" VERSION_ID="" PRETTY_NAME=""
# shellcheck disable=SC1090
. "$OS_RELEASE"
RELEASE="${PRETTY_NAME:-${ID} ${VERSION_ID}}"
DIST="" CAVEAT=""
case "${ID}" in
  ubuntu)
    major=${VERSION_ID%%.*}
    if [[ "$VERSION_ID" =~ ^[0-9]+\.[0-9]+$ ]] && [ "$major" -ge 20 ]; then
      DIST="xUbuntu_${VERSION_ID}"
    fi
    ;;
  debian)
    case "${VERSION_ID}" in
      11) DIST=Debian_11 ;;
      12) DIST=Debian_12
          CAVEAT="p4lang documents packages for ${DOCUMENTED} only: Debian 12 is tried, and if the repository has no packages for it this script says so and stops" ;;
    esac
    ;;
esac
if [ -z "$DIST" ]; then
  none_for_release "no p4lang packages for ${RELEASE} (${ID}:${VERSION_ID}): there is no repository to use; nothing was changed."
fi
REPO="${OBS}/${DIST}"
echo "install-bmv2: ${RELEASE}: p4lang's repository ${REPO}"
[ -z "$CAVEAT" ] || echo "install-bmv2: note: ${CAVEAT}"
if [ "$DRY_RUN" = 1 ]; then
  echo "install-bmv2: would install ${PKGS[*]} from it (dry run: nothing changed)"
  exit 0
fi

# -- install ------------------------------------------------------------------------------------
[ "$(id -u)" -eq 0 ] || die "needs root (apt-get); run it with sudo"
export DEBIAN_FRONTEND=noninteractive
need=()
for tool in curl gpg; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ "${#need[@]}" -gt 0 ]; then
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates curl gnupg; } >/dev/null 2>&1 \
    || die "needs ${need[*]} to reach p4lang's repository, and apt could not install it (no network?).
  Nothing was changed. ${ALTERNATIVES}"
fi

tmpkey=$(mktemp)
trap 'rm -f "$tmpkey"' EXIT
status=$(curl -sSL --connect-timeout 15 --retry 2 -o "$tmpkey" -w '%{http_code}' "${REPO}/Release.key" || true)
case "$status" in
  200) ;;
  404)
    none_for_release "p4lang's repository has no packages for ${RELEASE}: ${REPO} does not exist (HTTP 404); nothing was changed." ;;
  *)
    die "cannot reach p4lang's package repository at ${REPO} (HTTP ${status:-none}: no internet access, a proxy,
  or the repository moved). Nothing was changed. Set P4LANG_OBS_URL to a mirror.
  ${ALTERNATIVES}" ;;
esac

echo "install-bmv2: adding ${REPO} to apt (${LIST})"
install -d -m 0755 /etc/apt/keyrings
gpg --batch --yes --dearmor -o "$KEYRING" "$tmpkey"
echo "deb [signed-by=${KEYRING}] ${REPO}/ /" > "$LIST"
undo() { rm -f "$LIST" "$KEYRING"; }

if ! apt-get update -qq -o Dir::Etc::sourcelist="$LIST" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0; then
  undo
  die "apt-get update failed for ${REPO}; removed ${LIST} again"
fi
missing=()
for pkg in "${PKGS[@]}"; do
  candidate=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')
  [ -n "$candidate" ] && [ "$candidate" != "(none)" ] || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  undo
  none_for_release "p4lang's repository ${REPO} has no ${missing[*]} for ${RELEASE}; removed ${LIST} again."
fi
apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null \
  || die "apt-get install ${PKGS[*]} failed (see apt's message above)"

for tool in simple_switch_grpc simple_switch_CLI p4c-bm2-ss; do
  command -v "$tool" >/dev/null || die "${tool} is still missing after installing ${PKGS[*]}"
done
echo "install-bmv2: installed $(p4c-bm2-ss --version 2>/dev/null | head -n1) and simple_switch_grpc"
