"""QEMU's and SSH's command lines, and which accelerator this machine can use.

The VM's only network is QEMU's user-mode stack with `restrict=on`: the guest reaches nothing,
not even the host, and its SSH port is forwarded to 127.0.0.1 only. KVM is used where it works; a
nested guest whose CPU shows no vmx/svm, or whose KVM does not boot a kernel within a short probe,
runs under TCG, and the check says which and why.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

QEMU = "qemu-system-x86_64"
KVM_PROBE_S = 30.0


@dataclass(frozen=True)
class VmSpec:
    """One boot of one disk: how big, how accelerated, where its console and SSH go."""

    disk: Path
    ssh_port: int
    console_log: Path
    accel: str = "tcg"  # "kvm" | "tcg"
    disk_format: str = "qcow2"
    cpus: int = 2
    memory_mib: int = 6144
    kernel: Path | None = None  # direct kernel boot (the first boot, before GRUB is on the disk)
    initrd: Path | None = None
    append: str = ""
    cache: str = "unsafe"  # a throwaway overlay; "writeback" when the boot writes the cached image
    name: str = "mrc-vm"


def qemu_argv(spec: VmSpec) -> list[str]:
    """The full QEMU command line for `spec`."""
    if spec.accel not in ("kvm", "tcg"):
        raise ValueError(f"accel must be kvm or tcg, not {spec.accel!r}")
    if not 1 <= spec.ssh_port <= 65535:
        raise ValueError(f"ssh_port {spec.ssh_port} is not a TCP port")
    argv = [
        QEMU, "-name", spec.name, "-machine", f"q35,accel={spec.accel}",
        "-cpu", "host" if spec.accel == "kvm" else "max",
        "-smp", str(spec.cpus), "-m", str(spec.memory_mib),
        "-display", "none", "-monitor", "none", "-nodefaults",
        "-serial", f"file:{spec.console_log}",
        "-drive", f"file={spec.disk},if=virtio,format={spec.disk_format},cache={spec.cache}",
        "-netdev", f"user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:{spec.ssh_port}-:22",
        "-device", "virtio-net-pci,netdev=net0",
        "-device", "virtio-rng-pci",
    ]  # fmt: skip
    if spec.kernel is not None:
        argv += ["-kernel", str(spec.kernel)]
        if spec.initrd is not None:
            argv += ["-initrd", str(spec.initrd)]
        argv += ["-append", spec.append]
    return argv


def ssh_argv(
    key: Path, port: int, command: str, *, user: str = "vagrant", connect_timeout: int = 10
) -> list[str]:
    """SSH to the guest through the loopback forward; the guest's host key is new every build."""
    return [
        "ssh", "-i", str(key), "-p", str(port),
        "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
        "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
        "-o", f"ConnectTimeout={connect_timeout}",
        "-o", "ServerAliveInterval=20", "-o", "ServerAliveCountMax=9",
        f"{user}@127.0.0.1", "--", command,
    ]  # fmt: skip


def cpu_has_virtualization(cpuinfo: str) -> bool:
    flags = {w for line in cpuinfo.splitlines() if line.startswith("flags") for w in line.split()}
    return bool(flags & {"vmx", "svm"})


def kvm_probe_argv(kernel: Path) -> list[str]:
    """A kernel without a root disk under KVM: it prints its banner and panics within seconds."""
    return [
        QEMU, "-machine", "q35,accel=kvm", "-cpu", "host", "-m", "256", "-display", "none",
        "-monitor", "none", "-nodefaults", "-no-reboot", "-serial", "stdio",
        "-kernel", str(kernel), "-append", "console=ttyS0 panic=-1",
    ]  # fmt: skip


def choose_accel(requested: str, kernel: Path | None) -> tuple[str, str]:
    """(`kvm` or `tcg`, why). `requested` is auto, kvm or tcg; auto tries KVM and falls back."""
    if requested == "tcg":
        return "tcg", "asked for TCG"
    why_not = _kvm_unusable(kernel)
    if why_not is None:
        return "kvm", "KVM works here"
    if requested == "kvm":
        raise RuntimeError(f"KVM asked for but unusable: {why_not}")
    return "tcg", f"KVM unusable ({why_not})"


def _kvm_unusable(kernel: Path | None) -> str | None:
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "no /dev/kvm this user can open"
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    if not cpu_has_virtualization(cpuinfo):
        return "/dev/kvm is there but the CPU shows no vmx/svm: nested virtualization is off"
    if kernel is None:
        return None
    try:
        res = subprocess.run(kvm_probe_argv(kernel), capture_output=True, text=True, timeout=KVM_PROBE_S)
    except subprocess.TimeoutExpired:
        return f"a kernel under KVM printed no panic within {KVM_PROBE_S:.0f} s"
    if "Linux version" not in res.stdout:
        return f"a kernel under KVM did not start: {(res.stderr or res.stdout).strip()[-200:]}"
    return None
