#!/bin/bash
# Runs inside the image root (mrc_vm.builder) last: what only the build needed goes. apt's package
# lists stay (install-system-deps.sh reads them offline); the downloaded .debs go.
set -euo pipefail
apt-get clean
rm -f /usr/sbin/policy-rc.d
# the initramfs was made before /etc/fstab named the root: made again, it checks the root with
# e2fsck before mounting it (else systemd checks it mounted and reboots when it repairs anything)
update-initramfs -u -k all >/dev/null 2>&1
# the VM's DNS is systemd-resolved's (the build used the host's resolv.conf)
ln -sf ../run/systemd/resolve/stub-resolv.conf /etc/resolv.conf
# every boot of a copy is a new machine to systemd
: >/etc/machine-id
rm -f /var/lib/dbus/machine-id
rm -rf /tmp/mrc-vm /root/.cache/pip
