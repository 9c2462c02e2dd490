"""The Debian 12 image: what it holds, where the cache keeps it, and the commands that build it.

Two layers, each cached under its key: the *base* (debootstrap of the stock system: kernel, systemd,
sshd, GRUB, a `vagrant` user; then the project's own `install-system-deps.sh`) and the *project*
(a `git clone` of the tree being tested, set up inside as the README says: `make setup`). A new
commit rebuilds only the project layer. Every command that enters the image root runs in private
mount, PID and UTS namespaces (`unshare`): /proc, /sys and /dev are mounted only there, so nothing
leaks into the host's mount table and every process a package script started dies with the build,
even when it fails. The disk is written from the directory by `mkfs.ext4 -d` at an offset inside
a partitioned raw file: no loop device, no mount on the host.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from mrc_vm.apt_sources import AptSource

SUITE = "bookworm"
ROOT_LABEL = "mrc-root"
GUEST_USER = "vagrant"
GUEST_HOME = f"/home/{GUEST_USER}"
GUEST_PROJECT = f"{GUEST_HOME}/mrc-testbed"
PART_OFFSET_MIB = 1
# The base system: the stock kernel and systemd, sshd for the check and Vagrant, GRUB to boot from
# the disk, rsync for Vagrant's synced folder, git for the clone, sudo for `./run.sh`.
BASE_PACKAGES = (
    "linux-image-amd64", "initramfs-tools", "systemd-sysv", "systemd-resolved", "udev", "dbus",
    "kmod", "grub-pc", "openssh-server", "sudo", "git", "rsync", "ca-certificates", "iproute2",
    "python3", "make", "less", "procps",
)  # fmt: skip
# Bumped when what the base layer holds changes, so old caches are not reused.
BASE_FORMAT = 1


def cache_root() -> Path:
    """`$MRC_VM_CACHE`, else `$XDG_CACHE_HOME/mrc-testbed/vm` (`~/.cache/...`)."""
    if env := os.environ.get("MRC_VM_CACHE"):
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "mrc-testbed" / "vm"


@dataclass(frozen=True)
class ImageSpec:
    """What one image is built from; `base_key` and `project_key` name its cache entries."""

    sources: tuple[AptSource, ...]
    commit: str
    deps_script_sha: str
    disk_gib: int = 24
    proxy: str | None = None
    packages: tuple[str, ...] = BASE_PACKAGES

    @property
    def mirror(self) -> str:
        return next(s.uri for s in self.sources if s.suite == SUITE)

    @property
    def base_key(self) -> str:
        h = hashlib.sha256(
            f"{BASE_FORMAT}|{SUITE}|{self.sources}|{self.packages}|{self.deps_script_sha}".encode()
        )
        return h.hexdigest()[:12]

    @property
    def project_key(self) -> str:
        return f"{self.base_key}-{self.commit[:12]}"


@dataclass(frozen=True)
class CacheLayout:
    """Where each piece lives under the cache root."""

    root: Path = field(default_factory=cache_root)

    @property
    def debs(self) -> Path:
        return self.root / "debs"

    @property
    def key(self) -> Path:
        return self.root / "ssh" / "id_ed25519"

    def base(self, spec: ImageSpec) -> Path:
        return self.root / f"base-{spec.base_key}"

    def image(self, spec: ImageSpec) -> Path:
        return self.root / f"image-{spec.project_key}"


def debootstrap_argv(spec: ImageSpec, rootfs: Path, debs: Path) -> list[str]:
    """debootstrap of the minimal base with the packages the image boots with."""
    return [
        "debootstrap", "--variant=minbase", f"--cache-dir={debs}", "--components=main",
        f"--include={','.join(spec.packages)}", SUITE, str(rootfs), spec.mirror,
    ]  # fmt: skip


# Mounts /proc, /sys and /dev inside the image root, then runs the command there. Runs as PID 1
# of a fresh PID namespace in a private mount namespace: when it ends, the kernel ends every
# process left in it and drops every mount, whatever happened.
_ENTER = 'r="$1"; shift; mount -t proc proc "$r/proc" && mount --rbind /sys "$r/sys" && \
mount --rbind /dev "$r/dev" && exec chroot "$r" "$@"'


def isolated_argv(argv: list[str]) -> list[str]:
    """`argv` in private mount, PID and UTS namespaces (nothing it mounts reaches the host)."""
    return ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--uts", "--", *argv]


def chroot_argv(rootfs: Path, argv: list[str]) -> list[str]:
    """`argv` inside the image root with /proc, /sys and /dev mounted only for it."""
    return isolated_argv(["/bin/sh", "-c", _ENTER, "enter", str(rootfs), *argv])


def chroot_env(spec: ImageSpec) -> dict[str, str]:
    """The environment of commands in the image root: a plain PATH, apt's proxy if the host has one."""
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
           "DEBIAN_FRONTEND": "noninteractive"}  # fmt: skip
    if spec.proxy:
        env |= {"http_proxy": spec.proxy, "HTTP_PROXY": spec.proxy}
    return env


def disk_bytes(spec: ImageSpec) -> int:
    return spec.disk_gib << 30


def sfdisk_script() -> str:
    """One bootable Linux partition from 1 MiB to the end (MBR: GRUB's BIOS boot goes before it)."""
    return f"label: dos\nstart={PART_OFFSET_MIB * 2048}, type=83, bootable\n"


# ext4 as Debian 12's own mke2fs makes it, whatever the host's e2fsprogs enables by default (1.47
# upstream turns on orphan_file and metadata_csum_seed, which Debian 12's GRUB cannot read).
MKE2FS_CONF = """[defaults]
\tblocksize = 4096
\tinode_size = 256
\tinode_ratio = 16384
[fs_types]
\text4 = {
\t\tfeatures = has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize
\t}
"""


def mkfs_argv(rootfs: Path, disk: Path, spec: ImageSpec) -> list[str]:
    """ext4 filled from `rootfs`, written into the partition of the raw disk file (no loop device).

    Run it with MKE2FS_CONFIG naming a file that holds MKE2FS_CONF."""
    offset = PART_OFFSET_MIB << 20
    blocks = (disk_bytes(spec) - offset) // 4096
    return [
        "mkfs.ext4", "-q", "-F", "-t", "ext4", "-L", ROOT_LABEL, "-b", "4096", "-E", f"offset={offset}",
        "-d", str(rootfs), str(disk), str(blocks),
    ]  # fmt: skip


def qemu_img_overlay_argv(base: Path, overlay: Path) -> list[str]:
    """A throwaway qcow2 on top of the cached image: a run never changes the cache."""
    return ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(base), str(overlay)]


def kernel_cmdline() -> str:
    return f"root=LABEL={ROOT_LABEL} ro console=ttyS0,115200n8 panic=10"
