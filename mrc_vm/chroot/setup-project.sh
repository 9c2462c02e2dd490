#!/bin/bash
# Runs inside the image root (mrc_vm.builder) with the host's network: sets the cloned project up
# as the README says (system packages, then `make setup`), owned by the user who logs in.
set -euo pipefail
cd "$1"
./scripts/install-system-deps.sh
make setup
chown -R vagrant:vagrant "$1"
# matplotlib builds its font cache once per user; root's (`sudo ./run.sh demo`) is built now, so the
# first demo does not print "Matplotlib is building the font cache" in the middle of its lines
MPLBACKEND=Agg .venv/bin/python -c 'import matplotlib.font_manager' >/dev/null 2>&1 || true
