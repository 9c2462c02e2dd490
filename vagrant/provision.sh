#!/usr/bin/env bash
# Provisions the testbed VM: p4lang's BMv2/p4c/PI packages, the system packages, then `make setup`.
set -euo pipefail
src=${1:-/home/vagrant/mrc-testbed}
cd "$src"
./scripts/install-system-deps.sh
./scripts/install-bmv2.sh
make setup
chown -R vagrant:vagrant "$src"
echo "MRC testbed ready: vagrant ssh, then: cd $src && sudo ./run.sh demo"
