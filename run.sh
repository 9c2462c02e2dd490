#!/usr/bin/env bash
# One entry point for a fresh Debian 12 / Ubuntu 24.04 machine:
#   ./run.sh demo    MRC surviving faults on an emulated fabric (BMv2 if installed, else Linux SRv6)
#   ./run.sh test    every test (root and BMv2 tests skip with a reason where they cannot run)
# Any other argument is passed to make (setup, bench, lint, clean, ...).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
if [ "$(id -u)" -ne 0 ]; then
  exec sudo -E "$0" "$@"
fi
./scripts/install-system-deps.sh
exec make "${@:-demo}"
