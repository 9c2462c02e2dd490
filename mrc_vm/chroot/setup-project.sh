#!/bin/bash
# Runs inside the image root (mrc_vm.builder) with the host's network: sets the cloned project up
# as the README says (system packages, then `make setup`), owned by the user who logs in.
set -euo pipefail
cd "$1"
./scripts/install-system-deps.sh
make setup
chown -R vagrant:vagrant "$1"
