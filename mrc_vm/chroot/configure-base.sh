#!/bin/bash
# Runs inside the image root (mrc_vm.builder): brings the base system up to date from the sources
# the host wrote, and makes it a VM that boots by itself: systemd-networkd with DHCP on any NIC,
# sshd, a `vagrant` user (password "vagrant", sudo without a password, the build's SSH key), a
# serial console, GRUB's settings (GRUB itself goes onto the disk at the first boot).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get -y -qq -o Dpkg::Options::=--force-confold dist-upgrade >/dev/null

id vagrant >/dev/null 2>&1 || useradd -m -s /bin/bash -G sudo vagrant
echo vagrant:vagrant | chpasswd
echo 'vagrant ALL=(ALL) NOPASSWD:ALL' >/etc/sudoers.d/vagrant
chmod 0440 /etc/sudoers.d/vagrant
install -d -m 0700 -o vagrant -g vagrant /home/vagrant/.ssh
install -m 0600 -o vagrant -g vagrant /tmp/mrc-vm/authorized_keys /home/vagrant/.ssh/authorized_keys
# sshd under TCG: no reverse DNS of the client
echo 'UseDNS no' >/etc/ssh/sshd_config.d/mrc-vm.conf

cat >/etc/systemd/network/20-wired.network <<'NET'
[Match]
Name=en* eth*

[Network]
DHCP=yes
NET
systemctl enable systemd-networkd systemd-resolved ssh >/dev/null 2>&1
# boot does not wait for a network that the check does not give it
systemctl mask systemd-networkd-wait-online.service >/dev/null 2>&1

echo mrc-testbed >/etc/hostname
printf '127.0.0.1\tlocalhost\n127.0.1.1\tmrc-testbed\n::1\tlocalhost ip6-localhost ip6-loopback\n' >/etc/hosts
echo 'LABEL=mrc-root / ext4 errors=remount-ro 0 1' >/etc/fstab

sed -i -e 's/^GRUB_TIMEOUT=.*/GRUB_TIMEOUT=1/' \
  -e 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT=""/' \
  -e 's/^GRUB_CMDLINE_LINUX=.*/GRUB_CMDLINE_LINUX="console=tty0 console=ttyS0,115200n8 panic=10"/' \
  /etc/default/grub
grep -q '^GRUB_TERMINAL=' /etc/default/grub || echo 'GRUB_TERMINAL="console serial"' >>/etc/default/grub
grep -q '^GRUB_SERIAL_COMMAND=' /etc/default/grub \
  || echo 'GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"' >>/etc/default/grub
