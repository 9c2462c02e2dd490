#!/usr/bin/env bash
# Installs BMv2 (simple_switch_grpc), p4c (p4c-bm2-ss) and PI from p4lang's package
# repository on the openSUSE Build Service, for Debian 12 or Ubuntu 24.04.
#
# Opt-in only: `make setup BMV2=1` and the Vagrant VM call it; nothing else does.
# Without these packages the BMv2 tests skip with a reason and the testbed runs
# on the Linux SRv6 target. Idempotent: does nothing when the tools are there.
set -euo pipefail

PKGS=(p4lang-pi p4lang-bmv2 p4lang-p4c)
OBS=${P4LANG_OBS_URL:-https://download.opensuse.org/repositories/home:/p4lang}
KEYRING=/etc/apt/keyrings/p4lang.gpg
LIST=/etc/apt/sources.list.d/p4lang.list

die() { echo "install-bmv2: $*" >&2; exit 1; }

if command -v simple_switch_grpc >/dev/null && command -v p4c-bm2-ss >/dev/null && [ "${FORCE:-0}" != 1 ]; then
  echo "install-bmv2: simple_switch_grpc and p4c-bm2-ss already installed"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || die "needs root (apt-get); run it with sudo"
[ -r /etc/os-release ] || die "/etc/os-release missing: cannot tell the distribution"
# shellcheck disable=SC1091
. /etc/os-release
case "${ID}:${VERSION_ID}" in
  debian:12) DIST=Debian_12 ;;
  ubuntu:24.04) DIST=xUbuntu_24.04 ;;
  ubuntu:22.04) DIST=xUbuntu_22.04 ;;
  *) die "no p4lang packages for ${PRETTY_NAME:-$ID $VERSION_ID}; supported: Debian 12, Ubuntu 24.04 (22.04)" ;;
esac
REPO="${OBS}/${DIST}"

export DEBIAN_FRONTEND=noninteractive
need=()
for tool in curl gpg; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ "${#need[@]}" -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends ca-certificates curl gnupg >/dev/null
fi

echo "install-bmv2: adding p4lang's repository ${REPO}"
tmpkey=$(mktemp)
trap 'rm -f "$tmpkey"' EXIT
if ! curl -fsSL --connect-timeout 15 --retry 2 "${REPO}/Release.key" -o "$tmpkey"; then
  die "cannot reach p4lang's package repository at ${REPO} (no internet access, a proxy, or the
  repository moved). Nothing was changed. Set P4LANG_OBS_URL to a mirror, or build BMv2/p4c from
  source as p4lang's READMEs describe; the testbed runs on the Linux SRv6 target without them."
fi
install -d -m 0755 /etc/apt/keyrings
gpg --batch --yes --dearmor -o "$KEYRING" "$tmpkey"
echo "deb [signed-by=${KEYRING}] ${REPO}/ /" > "$LIST"

if ! apt-get update -qq -o Dir::Etc::sourcelist="$LIST" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0; then
  rm -f "$LIST" "$KEYRING"
  die "apt-get update failed for ${REPO}; removed ${LIST} again"
fi
apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null \
  || die "apt-get install ${PKGS[*]} failed (see apt's message above)"

for tool in simple_switch_grpc simple_switch_CLI p4c-bm2-ss; do
  command -v "$tool" >/dev/null || die "${tool} is still missing after installing ${PKGS[*]}"
done
echo "install-bmv2: installed $(p4c-bm2-ss --version 2>/dev/null | head -n1) and simple_switch_grpc"
