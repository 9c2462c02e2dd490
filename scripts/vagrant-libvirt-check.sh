#!/usr/bin/env bash
# Proves the Vagrant path on this machine: `vagrant up --provider=libvirt` with the Debian 12 box
# that `make vm-box` builds, provisioning by vagrant/provision.sh, the demo over `vagrant ssh`,
# then `vagrant destroy` — and checks that nothing is left behind.
#
#   sudo ./scripts/vagrant-libvirt-check.sh [BOX_FILE]     (default results/vm/mrc-testbed-debian12.box)
#   MRC_VM_UP_LIMIT (3600 s), MRC_VM_DEMO_LIMIT (5400 s): limits of `vagrant up` and of the demo
#
# For a machine without systemd and without a usable KVM (a nested VM, a container):
# - virtlogd and libvirtd are started by hand for the check and stopped after it (a libvirtd that
#   is already running is refused: the check would not know what is its own);
# - they run inside a network namespace the check creates, so libvirt's management network
#   (vagrant-libvirt's bridge with 192.168.121.0/24, isolated: MRC_VM_LIBVIRT_NETWORK_MODE=none)
#   exists only there and vanishes with it; vagrant runs there too, to reach the guest's SSH;
# - the domain type is plain QEMU (TCG: MRC_VM_LIBVIRT_DRIVER=qemu) unless MRC_VM_LIBVIRT_DRIVER=kvm;
# - Vagrant's home and machine state live in a temporary folder: the box is added there, and
#   removed with it; the box's volume in libvirt's pool is deleted at the end.
# Needs: vagrant, vagrant-libvirt, libvirt-daemon-system, rsync (Debian packages), root.
# The namespace is a host namespace: run it under the live lock where live fabrics share the host.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
root=$(pwd)
box=${1:-results/vm/mrc-testbed-debian12.box}
NS=mrcvagrant
BOX_NAME=mrc-testbed/debian12-check
say() { echo "vagrant-check: $*"; }

[ "$(id -u)" -eq 0 ] || { say "needs root (libvirtd, a network namespace)"; exit 2; }
for tool in vagrant libvirtd virtlogd virsh rsync ip; do
  command -v "$tool" >/dev/null || { say "missing $tool: apt-get install vagrant vagrant-libvirt libvirt-daemon-system rsync"; exit 2; }
done
[ -f "$box" ] || { say "no box file $box: make vm-box builds it"; exit 2; }
if pgrep -x libvirtd >/dev/null || pgrep -x virtlogd >/dev/null; then
  say "a libvirtd/virtlogd is already running: stop it first (this check starts and stops its own)"
  exit 2
fi
if ip netns list | grep -qw "$NS"; then say "network namespace $NS exists (a killed check?): ip netns del $NS"; exit 2; fi

work=$(mktemp -d /tmp/mrc-vagrant-check.XXXXXX)
export VAGRANT_HOME=$work/vagrant.d VAGRANT_DOTFILE_PATH=$work/dotfile VAGRANT_CHECKPOINT_DISABLE=1
export VAGRANT_DEFAULT_PROVIDER=libvirt MRC_VM_BOX=$BOX_NAME
export MRC_VM_LIBVIRT_DRIVER=${MRC_VM_LIBVIRT_DRIVER:-qemu} MRC_VM_LIBVIRT_NETWORK_MODE=none
export MRC_VM_CPUS=${MRC_VM_CPUS:-2} MRC_VM_MEMORY=${MRC_VM_MEMORY:-6144}
pool_existed=0
virsh_pool_default() { [ -f /etc/libvirt/storage/default.xml ]; }
virsh_pool_default && pool_existed=1
in_ns() { ip netns exec "$NS" "$@"; }

cleanup() {
  local rc=$?
  set +e
  say "cleaning up"
  if [ -d "$VAGRANT_DOTFILE_PATH" ]; then (cd "$root/vagrant" && in_ns vagrant destroy -f >/dev/null 2>&1); fi
  for dom in $(virsh list --all --name 2>/dev/null | grep '^vagrant_'); do
    virsh destroy "$dom" >/dev/null 2>&1; virsh undefine --remove-all-storage "$dom" >/dev/null 2>&1
  done
  for vol in $(virsh vol-list default 2>/dev/null | awk '/mrc-testbed-VAGRANTSLASH-debian12-check/ {print $1}'); do
    virsh vol-delete --pool default "$vol" >/dev/null 2>&1
  done
  for net in $(virsh net-list --all --name 2>/dev/null | grep '^vagrant-libvirt$'); do
    virsh net-destroy "$net" >/dev/null 2>&1; virsh net-undefine "$net" >/dev/null 2>&1
  done
  if [ "$pool_existed" = 0 ] && virsh pool-info default >/dev/null 2>&1; then
    virsh pool-destroy default >/dev/null 2>&1; virsh pool-undefine default >/dev/null 2>&1
  fi
  for pidfile in /run/libvirtd.pid /run/virtlogd.pid; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null
  done
  sleep 2
  ip netns del "$NS" 2>/dev/null
  rm -rf "$work"
  say "left behind: domains [$(virsh -c qemu:///system list --all --name 2>/dev/null | xargs)]," \
    "netns [$(ip netns list | grep -w "$NS")], qemu [$(pgrep -a qemu-system | grep -c vagrant_ || true)]"
  exit "$rc"
}
trap cleanup EXIT INT TERM

t0=$(date +%s)
ip netns add "$NS"
in_ns ip link set lo up
in_ns virtlogd -d
in_ns libvirtd -d
for _ in $(seq 30); do virsh -c qemu:///system version >/dev/null 2>&1 && break; sleep 1; done
say "libvirtd $(libvirtd --version | awk '{print $NF}') started inside network namespace $NS (domain type: ${MRC_VM_LIBVIRT_DRIVER})"

# every step has a limit (TCG: minutes where KVM takes seconds), so the check always ends
UP_LIMIT=${MRC_VM_UP_LIMIT:-3600} DEMO_LIMIT=${MRC_VM_DEMO_LIMIT:-5400}
step() { local s rc=0; s=$(date +%s); "$@" || rc=$?; say "($(( $(date +%s) - s )) s, exit ${rc})"; return "$rc"; }
say "vagrant box add --name $BOX_NAME $box"
step vagrant box add --name "$BOX_NAME" "$box"
cd "$root/vagrant"
say "vagrant up --provider=libvirt"
step in_ns timeout -k 60 "$UP_LIMIT" vagrant up --provider=libvirt
say "vagrant ssh -c 'cd mrc-testbed && sudo ./run.sh demo'"
demo_rc=0
step in_ns timeout -k 60 "$DEMO_LIMIT" vagrant ssh -c 'cd mrc-testbed && sudo ./run.sh demo' || demo_rc=$?
[ "$demo_rc" = 0 ] || say "the demo failed (exit ${demo_rc}; 124: over its ${DEMO_LIMIT} s limit); destroying the VM all the same"
say "vagrant destroy -f"
step in_ns timeout -k 60 900 vagrant destroy -f
cd "$root"
vagrant box remove --force "$BOX_NAME"
leftover=$(virsh list --all --name | grep -c '^vagrant_' || true)
[ "$leftover" = 0 ] || { say "FAIL: $leftover domain(s) left after vagrant destroy"; exit 1; }
[ "$demo_rc" = 0 ] || { say "FAIL: the demo in the VM (exit ${demo_rc})"; exit 1; }
say "PASS in $(( $(date +%s) - t0 )) s"
