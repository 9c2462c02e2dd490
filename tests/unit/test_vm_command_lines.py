"""The VM check's command lines (mrc_vm): what the image builder and the runner would run.

`make vm-test` itself is too long for CI (an hour under TCG); these pin the parts a change
could silently break: the guest stays off every network but a loopback SSH forward, the build
mounts nothing outside private namespaces, the disk is written without a loop device, the
time limits grow with the machine's slowness and stay finite, and the mirror is the host's.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mrc_vm import apt_sources, box, check, image, qemu, timing, vm
from mrc_vm.image import CacheLayout, ImageSpec

REPO = Path(__file__).resolve().parents[2]

SOURCES = (
    apt_sources.AptSource("http://mirror.example/debian", "bookworm", ("main",)),
    apt_sources.AptSource("http://mirror.example/debian-security", "bookworm-security", ("main",)),
)
SPEC = ImageSpec(SOURCES, commit="a" * 40, deps_script_sha="b" * 12)


def vm_spec(**kw: object) -> qemu.VmSpec:
    base: dict[str, object] = {
        "disk": Path("/c/o.qcow2"),
        "ssh_port": 40022,
        "console_log": Path("/c/con.log"),
    }
    return qemu.VmSpec(**(base | kw))  # type: ignore[arg-type]


def test_the_guest_has_no_network_but_a_loopback_ssh_forward() -> None:
    argv = qemu.qemu_argv(vm_spec())
    netdevs = [argv[i + 1] for i, a in enumerate(argv) if a == "-netdev"]
    assert netdevs == ["user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:40022-:22"]
    # a reboot is a reboot (the boot's fsck may ask for one); a panic loop ends at the boot's limit
    assert "-nodefaults" in argv and "-no-reboot" not in argv
    assert not any("bridge" in a or "tap" in a for a in argv)
    assert argv[argv.index("-machine") + 1] == "q35,accel=tcg" and argv[argv.index("-cpu") + 1] == "max"
    assert argv[argv.index("-smp") + 1] == "2" and argv[argv.index("-m") + 1] == "6144"
    assert "file:/c/con.log" in argv and "-kernel" not in argv


def test_kvm_and_a_direct_kernel_boot() -> None:
    argv = qemu.qemu_argv(
        vm_spec(accel="kvm", kernel=Path("/k"), initrd=Path("/i"), append="root=LABEL=x", disk_format="raw")
    )
    assert argv[argv.index("-machine") + 1] == "q35,accel=kvm" and argv[argv.index("-cpu") + 1] == "host"
    assert argv[argv.index("-kernel") + 1] == "/k" and argv[argv.index("-initrd") + 1] == "/i"
    assert argv[argv.index("-append") + 1] == "root=LABEL=x"
    assert "file=/c/o.qcow2,if=virtio,format=raw,cache=unsafe" in argv


@pytest.mark.parametrize(("field", "value"), [("accel", "hvf"), ("ssh_port", 0), ("ssh_port", 70000)])
def test_bad_vm_specs_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        qemu.qemu_argv(vm_spec(**{field: value}))


def test_ssh_goes_to_loopback_with_the_build_key_only() -> None:
    argv = qemu.ssh_argv(Path("/key"), 40022, "uname -r")
    assert argv[0] == "ssh" and argv[-3:] == ["vagrant@127.0.0.1", "--", "uname -r"]
    assert argv[argv.index("-p") + 1] == "40022" and argv[argv.index("-i") + 1] == "/key"
    assert "BatchMode=yes" in argv and "IdentitiesOnly=yes" in argv


def test_kvm_needs_the_cpu_flags() -> None:
    assert qemu.cpu_has_virtualization("flags\t\t: fpu vme svm sse\n")
    assert qemu.cpu_has_virtualization("flags\t\t: fpu vmx\n")
    assert not qemu.cpu_has_virtualization("flags\t\t: fpu vme sse hypervisor\n")
    assert qemu.choose_accel("tcg", None) == ("tcg", "asked for TCG")


def test_every_chroot_command_runs_in_private_namespaces(tmp_path: Path) -> None:
    argv = image.chroot_argv(tmp_path, ["/bin/bash", "/tmp/x.sh"])
    assert argv[:8] == ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--uts", "--"]
    script = argv[argv.index("-c") + 1]
    assert 'mount -t proc proc "$r/proc"' in script and 'mount --rbind /sys "$r/sys"' in script
    assert 'mount --rbind /dev "$r/dev"' in script and 'exec chroot "$r" "$@"' in script
    assert argv[-3:] == [str(tmp_path), "/bin/bash", "/tmp/x.sh"]


def test_the_enter_script_passes_its_arguments_through(tmp_path: Path) -> None:
    """The shell snippet, with mount and chroot replaced by echo: the root and argv arrive intact."""
    script = image._ENTER.replace("mount", "echo mount").replace("exec chroot", "echo chroot")
    res = subprocess.run(["sh", "-c", script, "enter", "/r o", "cmd", "a b"], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.splitlines()[-1] == "chroot /r o cmd a b"


def test_debootstrap_uses_the_mirror_and_a_package_cache(tmp_path: Path) -> None:
    argv = image.debootstrap_argv(SPEC, tmp_path / "rootfs", tmp_path / "debs")
    assert argv[0] == "debootstrap" and argv[-3:] == ["bookworm", str(tmp_path / "rootfs"), SOURCES[0].uri]
    include = next(a for a in argv if a.startswith("--include="))
    for pkg in ("linux-image-amd64", "systemd-sysv", "openssh-server", "grub-pc", "git", "rsync"):
        assert pkg in include.split("=", 1)[1].split(",")
    assert f"--cache-dir={tmp_path / 'debs'}" in argv


def test_the_disk_is_written_without_a_loop_device(tmp_path: Path) -> None:
    argv = image.mkfs_argv(tmp_path / "root", tmp_path / "disk.raw", SPEC)
    assert argv[:2] == ["mkfs.ext4", "-q"] and "-d" in argv and argv[argv.index("-L") + 1] == image.ROOT_LABEL
    assert argv[argv.index("-E") + 1] == "offset=1048576"
    assert int(argv[-1]) * 4096 + (1 << 20) == SPEC.disk_gib << 30  # the partition fills the disk
    assert image.sfdisk_script() == "label: dos\nstart=2048, type=83, bootable\n"
    assert image.qemu_img_overlay_argv(Path("/a.raw"), Path("/o.qcow2")) == [
        "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", "/a.raw", "/o.qcow2",
    ]  # fmt: skip


@pytest.mark.skipif(
    not all(map(shutil.which, ("mkfs.ext4", "sfdisk", "debugfs"))), reason="needs e2fsprogs, fdisk"
)
def test_mkfs_at_the_offset_makes_a_partition_debugfs_can_read(tmp_path: Path) -> None:
    """The real tools on a small disk: the partition table and the ext4 inside it, unprivileged."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "hostname").write_text("mrc-testbed\n")
    small = ImageSpec(SOURCES, "c" * 40, "d" * 12, disk_gib=1)
    disk = tmp_path / "disk.raw"
    with disk.open("wb") as f:
        f.truncate(image.disk_bytes(small))
    subprocess.run(["sfdisk", "--quiet", str(disk)], input=image.sfdisk_script(), text=True, check=True)
    conf = tmp_path / "mke2fs.conf"
    conf.write_text(image.MKE2FS_CONF)
    env = {**os.environ, "MKE2FS_CONFIG": str(conf)}
    subprocess.run(image.mkfs_argv(root, disk, small), check=True, capture_output=True, env=env)
    table = subprocess.run(["sfdisk", "--dump", str(disk)], capture_output=True, text=True, check=True).stdout
    assert "start=        2048" in table and "bootable" in table
    part = tmp_path / "part.raw"
    subprocess.run(
        ["dd", f"if={disk}", f"of={part}", "bs=1M", "skip=1", "count=64", "status=none"], check=True
    )
    cat = subprocess.run(["debugfs", "-R", "cat /etc/hostname", str(part)], capture_output=True, text=True)
    assert cat.stdout == "mrc-testbed\n"
    features = subprocess.run(["dumpe2fs", "-h", str(part)], capture_output=True, text=True).stdout
    assert "metadata_csum" in features and "orphan_file" not in features and "csum_seed" not in features


def test_cache_keys_follow_what_the_layers_hold(tmp_path: Path) -> None:
    other_commit = ImageSpec(SOURCES, "e" * 40, SPEC.deps_script_sha)
    other_deps = ImageSpec(SOURCES, SPEC.commit, "f" * 12)
    assert other_commit.base_key == SPEC.base_key and other_commit.project_key != SPEC.project_key
    assert other_deps.base_key != SPEC.base_key
    layout = CacheLayout(tmp_path)
    assert layout.image(SPEC).name == f"image-{SPEC.base_key}-aaaaaaaaaaaa"
    assert layout.base(SPEC).parent == tmp_path and layout.key == tmp_path / "ssh" / "id_ed25519"


def test_the_mirror_is_the_hosts(tmp_path: Path) -> None:
    (tmp_path / "etc/apt/sources.list.d").mkdir(parents=True)
    (tmp_path / "etc/apt/sources.list.d/debian.sources").write_text(
        "Types: deb\n# http://snapshot.example/x\nURIs: http://deb.example/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\nSigned-By: /k.gpg\n\n"
        "Types: deb\nURIs: http://deb.example/debian-security\nSuites: bookworm-security\n"
        "Components: main\n\n"
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\nComponents: main\n"
    )
    (tmp_path / "etc/apt/sources.list.d/other.list").write_text(
        "deb [signed-by=/x.gpg arch=amd64] https://other.example/apt cloud-sdk-bookworm main\n"
    )
    (tmp_path / "etc/apt/sources.list").write_text(
        "# nothing\ndeb http://deb.example/debian/ bookworm main contrib\n"
    )
    found = apt_sources.debian_sources(apt_sources.host_sources(tmp_path), "bookworm")
    assert [s.line() for s in found] == [
        "deb http://deb.example/debian bookworm main",
        "deb http://deb.example/debian bookworm-updates main",
        "deb http://deb.example/debian-security bookworm-security main",
    ]
    assert apt_sources.mirror_of(found, "bookworm") == "http://deb.example/debian"


def test_a_host_without_debian_sources_gets_deb_debian_org() -> None:
    ubuntu = apt_sources.parse_one_line("deb http://archive.ubuntu.com/ubuntu noble main universe\n")
    assert apt_sources.mirror_of(apt_sources.debian_sources(ubuntu, "bookworm"), "bookworm") == (
        apt_sources.DEFAULT_MIRROR
    )


def test_a_malformed_sources_line_is_skipped_not_a_crash() -> None:
    """The host's sources.list is input: an option bracket never closed is not a source."""
    text = (
        "deb [arch=amd64 http://m bookworm main\n"
        "deb [arch=amd64 signed-by=/k] http://deb.example/debian/ bookworm main\n"
    )
    assert [s.line() for s in apt_sources.parse_one_line(text)] == [
        "deb http://deb.example/debian bookworm main"
    ]


def test_limits_scale_with_the_machine_and_stay_finite() -> None:
    fast = timing.Speeds(host_s=timing.REFERENCE_HOST_S, guest_s=timing.REFERENCE_HOST_S)
    tcg = timing.Speeds(host_s=timing.REFERENCE_HOST_S, guest_s=timing.REFERENCE_HOST_S * 10)
    busy_tcg = timing.Speeds(host_s=timing.REFERENCE_HOST_S * 2, guest_s=timing.REFERENCE_HOST_S * 20)
    assert timing.step_limit_s(900, fast) == 900 * timing.MARGIN
    assert timing.step_limit_s(900, tcg) == 10 * timing.step_limit_s(900, fast)
    assert timing.step_limit_s(900, busy_tcg) == 2 * timing.step_limit_s(900, tcg)
    assert timing.step_limit_s(1, fast) == 120.0  # a floor for tiny steps
    not_booted = timing.Speeds(host_s=timing.REFERENCE_HOST_S)
    assert not_booted.guest_factor == timing.TCG_WORST  # before the guest answers: TCG's worst case
    assert timing.boot_limit_s(not_booted, "tcg") > timing.boot_limit_s(not_booted, "kvm")
    assert timing.boot_limit_s(busy_tcg, "tcg") == 2 * timing.boot_limit_s(not_booted, "tcg")


def test_calibration_output_is_parsed() -> None:
    assert timing.median_seconds("1.5\n0.9\nnoise\n1.1\n") == 1.1
    assert timing.parse_seconds("warning\n0.25\n") == 0.25
    with pytest.raises(ValueError):
        timing.median_seconds("Traceback ...")
    cmd = timing.guest_calibration_command(3)
    assert cmd.count("python3 -c '") == 3 and "range(2_000_000)" in cmd


def test_guest_steps_are_the_readmes_commands() -> None:
    assert (
        check.demo_command()
        == "cd /home/vagrant/mrc-testbed && sudo ./run.sh demo 'DEMO_ARGS=--target linux'"
    )
    linux = check.tests_command("linux")
    assert linux.startswith("cd /home/vagrant/mrc-testbed && sudo ./run.sh test 'PYTEST_ARGS=")
    repo = Path(__file__).resolve().parents[2]
    for path in check.SUITES["linux"].split():
        assert (repo / path).is_file(), path
    assert check.tests_command("all").endswith("'PYTEST_ARGS=-p no:cacheprovider'")


def test_pytest_counts_come_from_the_closing_line() -> None:
    out = "tests/x.py ....F\n==== 1 failed, 83 passed, 2 skipped, 1 error in 812.31s (0:13:32) ====\n"
    assert check.pytest_counts(out) == {"failed": 1, "passed": 83, "skipped": 2, "error": 1}
    assert check.pytest_counts("Traceback (most recent call last):\n") == {}


def test_the_box_is_a_libvirt_box(tmp_path: Path) -> None:
    assert box.metadata(24) == {"provider": "libvirt", "format": "qcow2", "virtual_size": 24}
    assert box.convert_argv(Path("/d.raw"), Path("/b.img")) == [
        "qemu-img",
        "convert",
        "-O",
        "qcow2",
        "/d.raw",
        "/b.img",
    ]
    assert box.tar_argv(Path("/x.box"), tmp_path)[-4:] == [
        "metadata.json",
        "Vagrantfile",
        "mrc-vm-key",
        "box.img",
    ]
    assert 'private_key_path = File.expand_path("mrc-vm-key", __dir__)' in box.BOX_VAGRANTFILE


def test_pip_in_the_image_reaches_the_index_as_the_hosts_pip(tmp_path: Path) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\ncert = /etc/lab-ca.pem\nindex-url = http://pypi.lab/simple\n")
    assert apt_sources.pip_settings({}, (conf,)) == {
        "index-url": "http://pypi.lab/simple",
        "cert": "/etc/lab-ca.pem",
    }
    # the environment wins, as with pip itself
    assert apt_sources.pip_settings({"PIP_CERT": "/x.pem"}, (conf,))["cert"] == "/x.pem"
    assert apt_sources.pip_settings({}, (tmp_path / "none.conf",)) == {}


@pytest.mark.parametrize(
    ("argv", "says", "qemu_said"),
    [
        (["true"], "exit status 0: the guest powered off or reset", "(nothing)"),
        (
            ["sh", "-c", "kill -9 $$"],
            "killed by signal 9 (not by this check: the OOM killer, or another program?)",
            "(nothing)",
        ),
        (
            ["sh", "-c", "echo 'qemu: Could not open x' >&2; exit 1"],
            "exit status 1",
            "qemu: Could not open x",
        ),
    ],
)
def test_a_guest_that_ends_while_booting_says_how_and_what_its_console_said_last(
    tmp_path: Path, argv: list[str], says: str, qemu_said: str
) -> None:
    """A QEMU gone before SSH answered: its exit, its own output and the console's last lines
    (a guest that resets under -no-reboot, or a QEMU the OOM killer ends, prints nothing itself)."""
    console = tmp_path / "console.log"
    console.write_text(
        "[ 19.9] systemd-shutdown[1]: Rebooting.\r\n\x1b[0;32m  OK  \x1b[0m] ok\n\n"
        "[ 19.97] reboot: Restarting system\n"
    )
    guest = vm.Guest(vm_spec(console_log=console), tmp_path / "key", 60, tmp_path / "qemu.log")
    with (tmp_path / "qemu.log").open("wb") as out:
        guest.proc = subprocess.Popen(argv, stdout=out, stderr=out)
    guest.proc.wait()
    guest.started = time.monotonic()
    with pytest.raises(RuntimeError) as err:
        guest.wait_ssh(30)
    assert str(err.value) == (
        f"QEMU ended while the guest booted ({says}; QEMU said: {qemu_said}; the guest's console "
        "ended with:\n  [ 19.9] systemd-shutdown[1]: Rebooting.\n  OK  ] ok\n"
        "  [ 19.97] reboot: Restarting system)"
    )


def test_sigterm_ends_the_runner_through_its_finally_blocks(tmp_path: Path) -> None:
    """A killed `make vm-test` left QEMU's overlay behind: SIGTERM now unwinds like an exit."""
    mark = tmp_path / "overlay"
    code = (
        "import pathlib, sys, time\n"
        "from mrc_vm.cli import exit_on_sigterm\n"
        "exit_on_sigterm()\n"
        f"p = pathlib.Path({str(mark)!r}); p.write_text('x')\n"
        "try:\n    print('ready', flush=True); time.sleep(60)\nfinally:\n    p.unlink()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert not mark.exists()
