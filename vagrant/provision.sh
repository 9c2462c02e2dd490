#!/usr/bin/env bash
# Provisions the testbed VM: the system packages, p4lang's BMv2/p4c/PI packages, then `make setup`.
# Without BMv2 (MRC_VM_BMV2=0, no p4lang packages for the release, or no way to reach p4lang's
# repository, as in an offline lab) it says so and goes on: the testbed then runs on the Linux
# SRv6 target. On a box that `make vm-box` built, everything is already there: nothing is fetched.
set -euo pipefail
src=${1:-/home/vagrant/mrc-testbed}
cd "$src"
./scripts/install-system-deps.sh
if [ "${MRC_VM_BMV2:-1}" = 0 ]; then
  echo "provision: BMv2 skipped (MRC_VM_BMV2=0): the testbed runs on the Linux SRv6 target"
elif ! ./scripts/install-bmv2.sh; then
  echo "provision: BMv2/p4c not installed (the reason is above); going on: the testbed runs on the Linux SRv6 target"
fi
make setup
chown -R vagrant:vagrant "$src"
echo "MRC testbed ready: vagrant ssh, then: cd $src && sudo ./run.sh demo"
