"""The image's first boot: the kernel started directly, GRUB written to the disk from inside.

This is how the disk becomes bootable without a loop device on the host: the guest runs
`grub-install /dev/vda` itself. The boot doubles as the image's smoke test: an image that does
not boot to SSH is never cached.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

from mrc_vm import builder
from mrc_vm.builder import BuiltImage
from mrc_vm.image import CacheLayout, ImageSpec, kernel_cmdline
from mrc_vm.qemu import VmSpec
from mrc_vm.timing import Speeds, boot_limit_s, step_limit_s
from mrc_vm.vm import Guest, free_port

INSTALL_GRUB = "sudo grub-install --target=i386-pc /dev/vda && sudo update-grub"


def ensure_image(tree: Path, layout: CacheLayout, spec: ImageSpec, accel: str, speeds: Speeds) -> BuiltImage:
    """The cached image of `spec`, built first if it is not there."""
    if (image := builder.cached_image(spec, layout)) is not None:
        return image
    t0 = time.monotonic()
    base = builder.build_base(spec, layout, tree)
    tmp = builder.build_project(spec, layout, tree, base)
    boot_s = install_bootloader(tmp, layout, accel, speeds)
    total = round(time.monotonic() - t0)
    image = builder.finish(
        tmp, layout.image(spec), {"first_boot_seconds": round(boot_s), "build_seconds": total}
    )
    builder.say(f"image ready in {total} s: {image.path}")
    return image


def install_bootloader(tmp: Path, layout: CacheLayout, accel: str, speeds: Speeds) -> float:
    """Boot `tmp`'s disk from its kernel, install GRUB, power off; seconds to SSH."""
    vm = VmSpec(
        disk=tmp / "disk.raw", disk_format="raw", cache="writeback", ssh_port=free_port(),
        console_log=tmp / "first-boot.console.log", accel=accel,
        kernel=tmp / "vmlinuz", initrd=tmp / "initrd.img", append=kernel_cmdline(), name="mrc-vm-first-boot",
    )  # fmt: skip
    limit = boot_limit_s(speeds, accel)
    builder.say(
        f"first boot ({accel.upper()}, kernel started directly, limit {limit:.0f} s): installing GRUB"
    )
    with Guest(
        vm, builder.ssh_key(layout), limit + step_limit_s(30, speeds) + 300, tmp / "qemu.log"
    ) as guest:
        boot_s = guest.wait_ssh(limit)
        builder.say(f"booted to SSH in {boot_s:.0f} s")
        res = guest.run(INSTALL_GRUB, step_limit_s(30, speeds))
        if res.rc != 0:
            raise RuntimeError(f"grub-install in the guest failed ({res.rc}):\n{res.output[-1500:]}")
        guest.stop()
        if guest.proc is not None and guest.proc.returncode not in (0, None):
            raise RuntimeError("the first boot did not power off cleanly")
    # A second boot, from the disk through GRUB: it proves the bootloader, and the root
    # filesystem's check at that boot (which repairs what the first boot left, then reboots)
    # happens here once, not at every run of the cached image.
    from_disk = replace(vm, kernel=None, initrd=None, append="", ssh_port=free_port(),
                        console_log=tmp / "second-boot.console.log", name="mrc-vm-second-boot")  # fmt: skip
    with Guest(from_disk, builder.ssh_key(layout), limit * 2 + 300, tmp / "qemu.log") as guest:
        builder.say(f"second boot, through GRUB: SSH in {guest.wait_ssh(limit * 2):.0f} s")
        guest.stop()
        if guest.proc is not None and guest.proc.returncode not in (0, None):
            raise RuntimeError("the second boot did not power off cleanly")
    return boot_s


def remove_cache(layout: CacheLayout) -> None:
    if layout.root.exists():
        shutil.rmtree(layout.root)
