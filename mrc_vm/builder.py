"""Builds the image, layer by layer, into the cache; a layer that is there is not built again.

A layer is built in `<name>.tmp` and renamed into place only when it is complete, so a build
that failed or was interrupted leaves nothing that a later run would take for a good image.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from mrc_vm import apt_sources
from mrc_vm.image import (
    GUEST_PROJECT,
    MKE2FS_CONF,
    SUITE,
    CacheLayout,
    ImageSpec,
    chroot_argv,
    chroot_env,
    debootstrap_argv,
    disk_bytes,
    isolated_argv,
    kernel_cmdline,
    mkfs_argv,
    sfdisk_script,
)

DEPS_SCRIPT = "scripts/install-system-deps.sh"


@dataclass(frozen=True)
class BuiltImage:
    """A finished image directory: the raw disk with GRUB, the kernel, what the build measured."""

    path: Path

    @property
    def disk(self) -> Path:
        return self.path / "disk.raw"

    @property
    def kernel(self) -> Path:
        return self.path / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.path / "initrd.img"

    @property
    def meta(self) -> dict[str, object]:
        data = json.loads((self.path / "image.json").read_text())
        assert isinstance(data, dict)
        return data


def say(msg: str) -> None:
    print(f"vm-image: {msg}", flush=True)


def run(argv: list[str], log: Path, env: dict[str, str] | None = None, input_text: str | None = None) -> None:
    """One build command, its output appended to the build log; a failure names the log's tail."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        res = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, env=env, input=input_text, text=True)
    if res.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise RuntimeError(f"{argv[0]} {' '.join(argv[1:3])}... exited {res.returncode} (log {log}):\n{tail}")


def spec_for(tree: Path, rev: str = "HEAD", disk_gib: int = 24) -> ImageSpec:
    """The image of commit `rev` of `tree`, from the host's Debian mirror and apt proxy."""
    argv = ["git", "-C", str(tree), "rev-parse", "--verify", f"{rev}^{{commit}}"]
    commit = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    deps = hashlib.sha256((tree / DEPS_SCRIPT).read_bytes()).hexdigest()[:12]
    sources = apt_sources.debian_sources(apt_sources.host_sources(), SUITE)
    return ImageSpec(tuple(sources), commit, deps, disk_gib=disk_gib, proxy=apt_sources.apt_proxy())


def ssh_key(layout: CacheLayout) -> Path:
    """The key that logs into every image of this cache (made once)."""
    if not layout.key.exists():
        layout.key.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mrc-vm", "-f", str(layout.key)], check=True
        )
    return layout.key


def _fresh(path: Path) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def _chroot_script(
    rootfs: Path, spec: ImageSpec, name: str, log: Path, *args: str, env: dict[str, str] | None = None
) -> None:
    staged = rootfs / "tmp" / "mrc-vm" / name
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_bytes(resources.files("mrc_vm").joinpath("chroot", name).read_bytes())
    run(
        chroot_argv(rootfs, ["/bin/bash", f"/tmp/mrc-vm/{name}", *args]),
        log,
        env=chroot_env(spec) | (env or {}),
    )


def _pip_env(rootfs: Path, spec: ImageSpec) -> dict[str, str]:
    """pip in the image root reaches the index as the host's does: same index, same trusted CAs
    (copied in for the build only: finalize.sh removes /tmp/mrc-vm)."""
    settings = apt_sources.pip_settings()
    env = {"PIP_INDEX_URL": settings["index-url"]} if "index-url" in settings else {}
    cert = Path(settings.get("cert", "/etc/ssl/certs/ca-certificates.crt"))
    if cert.is_file():
        (rootfs / "tmp" / "mrc-vm").mkdir(parents=True, exist_ok=True)
        shutil.copy(cert, rootfs / "tmp" / "mrc-vm" / "host-ca.pem")
        env["PIP_CERT"] = "/tmp/mrc-vm/host-ca.pem"
    return env


def build_base(spec: ImageSpec, layout: CacheLayout, tree: Path) -> Path:
    """debootstrap, the system set up as a VM, then the project's system packages."""
    base = layout.base(spec)
    if (base / "rootfs").is_dir() and (base / ".done").exists():
        return base
    tmp = _fresh(base)
    log, rootfs = tmp / "build.log", tmp / "rootfs"
    layout.debs.mkdir(parents=True, exist_ok=True)
    say(f"base layer: debootstrap {SUITE} from {spec.mirror} (log {base}/build.log)")
    t0 = time.monotonic()
    run(isolated_argv(debootstrap_argv(spec, rootfs, layout.debs)), log, env=chroot_env(spec))
    (rootfs / "etc/apt/sources.list").write_text("".join(s.line() + "\n" for s in spec.sources))
    for stale in (rootfs / "etc/apt/sources.list.d").glob("*"):
        stale.unlink()
    policy = rootfs / "usr/sbin/policy-rc.d"  # no service starts inside the build
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    # the build's DNS is the host's (systemd-resolved made it a link into the image's /run)
    (rootfs / "etc/resolv.conf").unlink(missing_ok=True)
    shutil.copy("/etc/resolv.conf", rootfs / "etc/resolv.conf")
    keys = rootfs / "tmp" / "mrc-vm" / "authorized_keys"
    keys.parent.mkdir(parents=True, exist_ok=True)
    keys.write_text(ssh_key(layout).with_suffix(".pub").read_text())
    _chroot_script(rootfs, spec, "configure-base.sh", log)
    shutil.copy(tree / DEPS_SCRIPT, rootfs / "tmp" / "mrc-vm" / "install-system-deps.sh")
    run(chroot_argv(rootfs, ["/bin/bash", "/tmp/mrc-vm/install-system-deps.sh"]), log, env=chroot_env(spec))
    (tmp / "base.json").write_text(
        json.dumps({"seconds": round(time.monotonic() - t0), "mirror": spec.mirror})
    )
    (tmp / ".done").touch()
    if base.exists():
        shutil.rmtree(base)
    tmp.rename(base)
    say(f"base layer built in {time.monotonic() - t0:.0f} s")
    return base


def build_project(spec: ImageSpec, layout: CacheLayout, tree: Path, base: Path) -> Path:
    """A copy of the base with the project cloned and set up, written to a raw disk."""
    image = layout.image(spec)
    tmp = _fresh(image)
    log, rootfs = tmp / "build.log", tmp / "rootfs"
    t0 = time.monotonic()
    say(f"project layer: clone of {spec.commit[:12]}, install-system-deps.sh, make setup (log {log})")
    run(["cp", "-a", "--reflink=auto", str(base / "rootfs"), str(rootfs)], log)
    dest = rootfs / GUEST_PROJECT.lstrip("/")
    run(["git", "clone", "--quiet", "--no-hardlinks", str(tree), str(dest)], log)
    run(["git", "-C", str(dest), "checkout", "--quiet", "--detach", spec.commit], log)
    _chroot_script(rootfs, spec, "setup-project.sh", log, GUEST_PROJECT, env=_pip_env(rootfs, spec))
    _chroot_script(rootfs, spec, "finalize.sh", log)
    kernels = sorted((rootfs / "boot").glob("vmlinuz-*"))
    version = kernels[-1].name.removeprefix("vmlinuz-")
    shutil.copy(kernels[-1], tmp / "vmlinuz")
    shutil.copy(rootfs / "boot" / f"initrd.img-{version}", tmp / "initrd.img")
    setup_s = time.monotonic() - t0
    say(f"project set up in {setup_s:.0f} s; writing the disk")
    disk = tmp / "disk.raw"
    with disk.open("wb") as f:
        f.truncate(disk_bytes(spec))
    run(["sfdisk", "--quiet", str(disk)], log, input_text=sfdisk_script())
    (tmp / "mke2fs.conf").write_text(MKE2FS_CONF)
    run(mkfs_argv(rootfs, disk, spec), log, env={**os.environ, "MKE2FS_CONFIG": str(tmp / "mke2fs.conf")})
    shutil.rmtree(rootfs)
    meta = {
        "commit": spec.commit,
        "kernel": version,
        "mirror": spec.mirror,
        "project_seconds": round(setup_s),
    }
    (tmp / "image.json").write_text(json.dumps(meta, indent=1))
    return tmp


def finish(tmp: Path, final: Path, extra: dict[str, object]) -> BuiltImage:
    """Record what the first boot measured and move the image into place; older images go."""
    meta = json.loads((tmp / "image.json").read_text()) | extra
    (tmp / "image.json").write_text(json.dumps(meta, indent=1))
    (tmp / ".done").touch()
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    for old in final.parent.glob("image-*"):
        if old != final and old.is_dir():
            shutil.rmtree(old)
    return BuiltImage(final)


def boot_cmdline() -> str:
    return kernel_cmdline()


def cached_image(spec: ImageSpec, layout: CacheLayout) -> BuiltImage | None:
    image = layout.image(spec)
    return BuiltImage(image) if (image / ".done").exists() else None


def fail(msg: str) -> None:
    print(f"vm-image: {msg}", file=sys.stderr, flush=True)
