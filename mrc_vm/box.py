"""The image as a Vagrant box for the libvirt provider (`vagrant box add --name NAME FILE`).

A libvirt box is a tar of `box.img` (qcow2), `metadata.json` and a Vagrantfile merged under the
project's. This box logs in with the key of the cache that built it (shipped inside the box,
named by the box's Vagrantfile): no well-known key opens it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from mrc_vm.builder import BuiltImage
from mrc_vm.image import CacheLayout

BOX_VAGRANTFILE = """\
# Embedded in the MRC testbed's Debian 12 box (mrc-vm box): how Vagrant logs in.
Vagrant.configure("2") do |config|
  config.ssh.username = "vagrant"
  config.ssh.private_key_path = File.expand_path("mrc-vm-key", __dir__)
  config.vm.provider :libvirt do |lv|
    lv.disk_bus = "virtio"
  end
end
"""


def metadata(virtual_gib: int) -> dict[str, object]:
    return {"provider": "libvirt", "format": "qcow2", "virtual_size": virtual_gib}


def convert_argv(disk: Path, out: Path) -> list[str]:
    return ["qemu-img", "convert", "-O", "qcow2", str(disk), str(out)]


def tar_argv(box: Path, folder: Path) -> list[str]:
    return [
        "tar",
        "-cf",
        str(box),
        "-C",
        str(folder),
        "metadata.json",
        "Vagrantfile",
        "mrc-vm-key",
        "box.img",
    ]


def pack(image: BuiltImage, layout: CacheLayout, out: Path) -> Path:
    """Write the box file to `out`; returns it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    size = image.disk.stat().st_size
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".box-") as tmp:
        folder = Path(tmp)
        subprocess.run(convert_argv(image.disk, folder / "box.img"), check=True)
        (folder / "metadata.json").write_text(json.dumps(metadata(-(-size // (1 << 30)))))
        (folder / "Vagrantfile").write_text(BOX_VAGRANTFILE)
        shutil.copy(layout.key, folder / "mrc-vm-key")
        (folder / "mrc-vm-key").chmod(0o600)
        subprocess.run(tar_argv(out, folder), check=True)
    print(
        f"vm-box: {out} ({out.stat().st_size >> 20} MiB): vagrant box add --name mrc-testbed/debian12 {out}"
    )
    return out
