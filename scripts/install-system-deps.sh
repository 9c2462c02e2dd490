#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the testbed needs. Idempotent: installs only what is missing.
# BMv2 and p4c are not in Debian's archive; see scripts/install-bmv2.sh (opt-in, p4lang's repository).
set -euo pipefail

PKGS=(
  make python3 python3-venv python3-dev python3-pip
  mininet iproute2 nftables ethtool iperf3 procps psmisc
  # ping for Mininet's pingall and `h0 ping h3` (no package mininet depends on brings it)
  iputils-ping
  tshark tcpdump
  # the Linux target's egress program (linux_target/bpf: ECN, trimming, priority queues)
  clang llvm libbpf-dev linux-libc-dev gcc
  # the tools that write the VM's disk without a loop device (its unit tests run them too)
  e2fsprogs fdisk
)
[ "${WITH_VAGRANT:-0}" = 1 ] && PKGS+=(vagrant)
# make vm-test / vm-image: QEMU and debootstrap (the disk tools are above)
[ "${WITH_VM:-0}" = 1 ] && PKGS+=(qemu-system-x86 qemu-utils debootstrap openssh-client git)

if [ "$(id -u)" -ne 0 ]; then
  echo "install-system-deps: needs root (apt-get); run it with sudo" >&2
  exit 1
fi

# The web view's browser test (tests/integration/test_view_browser.py) drives Debian's chromium
# through chromedriver. Ubuntu's chromium packages are only snap wrappers, which CI cannot run:
# there the test skips and says why.
apt-cache show chromium >/dev/null 2>&1 || apt-get update -qq
if apt-cache show chromium >/dev/null 2>&1 && ! apt-cache show chromium 2>/dev/null | grep -q "snap"; then
  PKGS+=(chromium chromium-driver)
fi

# bpftool is its own package on Debian 12; Ubuntu ships it in linux-tools-common.
if ! command -v bpftool >/dev/null 2>&1; then
  apt-cache show bpftool >/dev/null 2>&1 || apt-get update -qq
  if apt-cache show bpftool >/dev/null 2>&1; then PKGS+=(bpftool); else PKGS+=(linux-tools-common); fi
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
echo "install-system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no without a prompt.
echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
