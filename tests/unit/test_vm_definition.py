"""The VM definition and the BMv2 install script: Ubuntu 24.04 by default, Debian 12 selectable,
and a plain answer (which repository, or none) for every release before anything changes."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "install-bmv2.sh"
VAGRANTFILE = REPO / "vagrant" / "Vagrantfile"
APT_LIST = Path("/etc/apt/sources.list.d/p4lang.list")

RELEASES = {
    "ubuntu24.04": 'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nID=ubuntu\nVERSION_ID="24.04"\n',
    "ubuntu22.04": 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nVERSION_ID="22.04"\n',
    "ubuntu18.04": 'PRETTY_NAME="Ubuntu 18.04.6 LTS"\nID=ubuntu\nVERSION_ID="18.04"\n',
    "debian11": 'PRETTY_NAME="Debian GNU/Linux 11 (bullseye)"\nID=debian\nVERSION_ID="11"\n',
    "debian12": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
    "debian10": 'PRETTY_NAME="Debian GNU/Linux 10 (buster)"\nID=debian\nVERSION_ID="10"\n',
    "fedora40": 'PRETTY_NAME="Fedora Linux 40"\nID=fedora\nVERSION_ID=40\n',
}


def run_script(
    tmp_path: Path, release: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    os_release = tmp_path / f"os-release-{release}"
    os_release.write_text(RELEASES[release])
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        env={**os.environ, "MRC_OS_RELEASE": str(os_release), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("release", "dist"),
    [("ubuntu24.04", "xUbuntu_24.04"), ("ubuntu22.04", "xUbuntu_22.04"), ("debian11", "Debian_11")],
)
def test_a_release_p4lang_publishes_for_names_its_repository(tmp_path: Path, release: str, dist: str) -> None:
    res = run_script(tmp_path, release, "--dry-run")
    assert res.returncode == 0, res.stderr
    assert f"home:/p4lang/{dist}" in res.stdout and "nothing changed" in res.stdout
    assert "note:" not in res.stdout


def test_debian_12_is_tried_with_a_plain_caveat(tmp_path: Path) -> None:
    res = run_script(tmp_path, "debian12", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "home:/p4lang/Debian_12" in res.stdout
    assert "documents packages for Ubuntu 20.04 and later, Debian 11 only" in res.stdout


@pytest.mark.parametrize("release", ["ubuntu18.04", "debian10", "fedora40"])
def test_a_release_without_packages_is_told_so_and_nothing_changes(tmp_path: Path, release: str) -> None:
    res = run_script(tmp_path, release, "--dry-run")
    assert res.returncode == 2
    assert "no p4lang packages for" in res.stderr and "nothing was changed" in res.stderr
    assert "Ubuntu 20.04 and later, Debian 11" in res.stderr and "Vagrant VM" in res.stderr
    # without --dry-run too (it stops before it needs root or the network)
    assert run_script(tmp_path, release, env={"FORCE": "1"}).returncode == 2


def test_unknown_options_are_refused(tmp_path: Path) -> None:
    res = run_script(tmp_path, "ubuntu24.04", "--bogus")
    assert res.returncode == 1 and "unknown option --bogus" in res.stderr


def test_from_source_dry_run_names_every_pin_and_patch(tmp_path: Path) -> None:
    """Debian 12 has no p4lang packages: --from-source builds pinned sources; its dry run says
    which (the pins are checked against the upstream repositories when they change)."""
    res = run_script(tmp_path, "debian12", "--from-source", "--dry-run", "--src", str(tmp_path / "src"))
    assert res.returncode == 0, res.stderr
    for pin in (
        "f96af95e090619491e3abf2df69df340c2c9cb46",  # PI
        "9674187f610c81878e3586f9a1746dcc7f903114",  # behavioral-model 1.15.5
        "v1.2.4.11 (5a7eeeedb4be7d38590b1db39470f11728e4bc45)",  # p4c
        "1e771c4e05c4e7e250df00212b3ca02ee3202d71",  # the p4runtime protos p4c compiles
    ):
        assert pin in res.stdout
    patches = sorted(p.name for p in (REPO / "scripts" / "bmv2-patches").glob("p4c-*.patch"))
    assert len(patches) == 3 and " ".join(patches) in res.stdout
    assert "dry run: nothing changed" in res.stdout and not (tmp_path / "src").exists()
    bad = run_script(tmp_path, "debian12", "--from-source", "--jobs", "0")
    assert bad.returncode == 1 and "--jobs must be a positive number" in bad.stderr
    bad = run_script(tmp_path, "debian12", "--from-source", "--bogus")
    assert bad.returncode == 1 and "unknown option --bogus" in bad.stderr


def test_the_p4c_patches_are_plain_unified_diffs() -> None:
    """Each patch says why in its header and changes only the files it names (git apply / patch -p1)."""
    for patch in (REPO / "scripts" / "bmv2-patches").glob("*.patch"):
        text = patch.read_text()
        header, _, diff = text.partition("diff --git ")
        assert "Debian 12" in header and diff, patch.name
        assert all(line.startswith(("diff --git", "index ", "--- a/", "+++ b/", "@@", " ", "+", "-"))
                   for line in ("diff --git " + diff).splitlines() if line), patch.name  # fmt: skip


@pytest.fixture
def empty_repository_server(tmp_path: Path) -> Iterator[str]:
    """An HTTP server on loopback with nothing in it: every repository answers 404."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/home:/p4lang"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.skipif(os.geteuid() != 0, reason="the install path of the script needs root")
@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("gpg")), reason="needs curl and gpg")
def test_a_missing_repository_is_reported_and_apt_is_left_alone(
    tmp_path: Path, empty_repository_server: str
) -> None:
    had_list = APT_LIST.exists()
    res = run_script(tmp_path, "debian12", env={"FORCE": "1", "P4LANG_OBS_URL": empty_repository_server})
    assert res.returncode == 2, res.stdout + res.stderr
    assert "has no packages for Debian GNU/Linux 12 (bookworm)" in res.stderr
    assert "does not exist (HTTP 404)" in res.stderr and "nothing was changed" in res.stderr
    assert APT_LIST.exists() == had_list


RUBY_STUB = r"""
class Anything
  def method_missing(*_args, **_kw); self; end
  def respond_to_missing?(*_args); true; end
end
class VM < Anything
  attr_accessor :box
  def provider(*_args); yield Anything.new; end
end
class Config
  def vm; @vm ||= VM.new; end
end
module Vagrant
  def self.configure(_version)
    config = Config.new
    yield config
    puts "BOX=#{config.vm.box}"
  end
end
load ARGV[0]
"""


@pytest.mark.skipif(shutil.which("ruby") is None, reason="ruby not installed (it comes with vagrant)")
@pytest.mark.parametrize(
    ("env", "box"),
    [
        ({}, "bento/ubuntu-24.04"),
        ({"MRC_VM_OS": "ubuntu24.04"}, "bento/ubuntu-24.04"),
        ({"MRC_VM_OS": "debian12"}, "debian/bookworm64"),
        ({"MRC_VM_OS": "debian12", "MRC_VM_BOX": "example/other"}, "example/other"),
    ],
)
def test_vagrantfile_box(tmp_path: Path, env: dict[str, str], box: str) -> None:
    stub = tmp_path / "stub.rb"
    stub.write_text(RUBY_STUB)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MRC_VM_")}
    res = subprocess.run(
        ["ruby", str(stub), str(VAGRANTFILE)],
        env={**clean, **env},
        cwd=VAGRANTFILE.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"BOX={box}"


@pytest.mark.skipif(shutil.which("ruby") is None, reason="ruby not installed (it comes with vagrant)")
def test_vagrantfile_refuses_an_unknown_system(tmp_path: Path) -> None:
    stub = tmp_path / "stub.rb"
    stub.write_text(RUBY_STUB)
    res = subprocess.run(
        ["ruby", str(stub), str(VAGRANTFILE)],
        env={**os.environ, "MRC_VM_OS": "fedora40"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode != 0 and "MRC_VM_OS=fedora40 is not one of ubuntu24.04, debian12" in res.stderr


LIBVIRT_STUB = r"""
class Recorder
  def initialize(log); @log = log; end
  def method_missing(name, *args, **_kw)
    @log << "#{name.to_s.chomp('=')}=#{args.first}" if name.to_s.end_with?("=")
    self
  end
  def respond_to_missing?(*_args); true; end
end
class VM < Recorder
  def provider(name)
    log = []
    yield Recorder.new(log)
    puts "#{name}: #{log.join(' ')}"
  end
end
class Config
  def vm; @vm ||= VM.new([]); end
  def method_missing(*_args); Recorder.new([]); end
  def respond_to_missing?(*_args); true; end
end
module Vagrant
  def self.configure(_version); yield Config.new; end
end
load ARGV[0]
"""


def libvirt_settings(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    stub = tmp_path / "libvirt_stub.rb"
    stub.write_text(LIBVIRT_STUB)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MRC_VM_")}
    return subprocess.run(
        ["ruby", str(stub), str(VAGRANTFILE)], env={**clean, **env}, cwd=VAGRANTFILE.parent,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.skipif(shutil.which("ruby") is None, reason="ruby not installed (it comes with vagrant)")
@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "driver=kvm cpus=4 memory=8192 cpu_mode=host-model management_network_mode=nat"),
        (
            {
                "MRC_VM_LIBVIRT_DRIVER": "qemu",
                "MRC_VM_CPUS": "2",
                "MRC_VM_MEMORY": "6144",
                "MRC_VM_LIBVIRT_NETWORK_MODE": "none",
            },
            "driver=qemu cpus=2 memory=6144 cpu_mode=host-model management_network_mode=none",
        ),
        ({"MRC_VM_LIBVIRT_CPU_MODE": "host-passthrough"}, "cpu_mode=host-passthrough"),
    ],
)
def test_vagrantfile_takes_the_libvirt_options_from_the_environment(
    tmp_path: Path, env: dict[str, str], expected: str
) -> None:
    res = libvirt_settings(tmp_path, env)
    assert res.returncode == 0, res.stderr
    libvirt = next(line for line in res.stdout.splitlines() if line.startswith("libvirt: "))
    assert expected in libvirt


@pytest.mark.skipif(shutil.which("ruby") is None, reason="ruby not installed (it comes with vagrant)")
def test_vagrantfile_refuses_an_unknown_libvirt_driver(tmp_path: Path) -> None:
    res = libvirt_settings(tmp_path, {"MRC_VM_LIBVIRT_DRIVER": "xen"})
    assert res.returncode != 0 and "MRC_VM_LIBVIRT_DRIVER=xen is not kvm or qemu" in res.stderr
