"""The pre-flight names every missing item in one message (topologies.preflight), without root.

The kernel probes themselves run in tests/integration (they need root); here their results
are given, as are the kernel release and the user id, and PATH is narrowed to hide tools.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mrc_fabric.topology import Target, build_clos
from topologies import kernel_probe, preflight
from topologies.rundir import RunDir, proc_start_time

ALL_WORK = dict.fromkeys(kernel_probe.PROBES)


@pytest.fixture
def kernel_works(monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    results = dict(ALL_WORK)
    monkeypatch.setattr(preflight, "probe_kernel", lambda target: results)
    return results


def test_a_machine_with_everything_has_nothing_missing(kernel_works: dict[str, str | None]) -> None:
    assert preflight.check(Target.LINUX, release="6.1.0-56-amd64", euid=0) == []


def test_every_missing_item_is_in_one_message(
    kernel_works: dict[str, str | None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    kernel_works["srv6"] = "route fcbb:bb00:1::/48 (csid): Invalid argument"
    kernel_works["egress_bpf"] = "the kernel refused mrc_egress.o: Operation not permitted"
    bin_dir = tmp_path / "bin"  # every tool but nft and ethtool
    bin_dir.mkdir()
    for tool in ("ip", "tc", "mnexec", "unshare", "bpftool"):
        real = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout
        (bin_dir / tool).symlink_to(real.strip() or "/bin/true")
    monkeypatch.setenv("PATH", str(bin_dir))
    missing = preflight.check(Target.LINUX, release="5.15.0-91-generic", euid=1000)
    text = str(preflight.PreflightError(missing))
    assert text.startswith(f"this machine cannot run the live fabric yet ({len(missing)} things missing):")
    for said in ("not root", "Linux 5.15.0-91-generic is older than 6.1", "nft not on PATH",
                 "apt-get install nftables", "ethtool not on PATH"):  # fmt: skip
        assert said in text, text
    assert "Traceback" not in text and len(text.splitlines()) == len(missing) + 1
    # without root the probes are not run (they need it): no kernel line then
    assert not any(m.what.startswith("kernel:") for m in missing)
    root = preflight.check(Target.LINUX, release="6.18.0", euid=0)
    kernel = [m for m in root if m.what.startswith("kernel:")]
    assert (
        len(kernel) == 2
        and "in Linux since 6.1" in kernel[0].fix
        and "Operation not permitted" in kernel[1].fix
    )


def test_a_missing_tool_skips_the_probes_that_need_it(monkeypatch: pytest.MonkeyPatch) -> None:
    nft = next(f for f in kernel_probe.FEATURES if f.name == "nft_netdev")
    monkeypatch.setattr(preflight.shutil, "which", lambda tool: None if tool == "nft" else "/bin/" + tool)
    assert not preflight._can_try(nft)  # said once, as the missing tool, not again as the kernel's


def test_the_bmv2_target_asks_no_linux_release_and_no_linux_tools(
    kernel_works: dict[str, str | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preflight.shutil, "which", lambda tool: None if tool in ("nft", "bpftool") else tool)
    assert preflight.check(Target.BMV2, release="5.15.0", euid=0) == []


def test_python_without_mininet_is_named(
    kernel_works: dict[str, str | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = preflight.importlib.util.find_spec
    monkeypatch.setattr(
        preflight.importlib.util, "find_spec", lambda n, *a: None if n == "mininet" else real(n)
    )
    (m,) = preflight.check(Target.LINUX, release="6.1.0", euid=0)
    assert "cannot import mininet" in m.what and "--system-site-packages" in m.fix


def test_a_killed_runs_processes_ask_for_make_clean(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = RunDir.create(runs, latest=True)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    run.write_run_info({"pid": int(dead.stdout), "pid_start_time": 1})  # its owner is gone
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert preflight.check_leftovers(runs) == []  # nothing recorded alive yet
        run.record(agent.pid, "agent", "h0")
        assert proc_start_time(agent.pid) is not None
        (m,) = preflight.check_leftovers(runs)
        assert f"run {run.path} was killed and left 1 processes (agent)" in m.what
        assert "make clean" in m.fix
    finally:
        agent.kill()
        agent.wait()
    assert preflight.check_leftovers(runs) == []


def test_interfaces_a_fabric_needs_in_the_machines_namespace_ask_for_make_clean(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bmv2 = build_clos(2, 2, 2, 2, prefix="pf", target=Target.BMV2)
    names = preflight.root_ifnames(bmv2)
    assert names and all(n.startswith("pft") for n in names)  # switch ports only: hosts have netns
    assert preflight.root_ifnames(build_clos(2, 2, 2, 2, prefix="pf")) == []  # Linux: all in netns
    monkeypatch.setattr(preflight, "root_links", lambda: {"lo", "eth0", names[0], names[1]})
    (m,) = preflight.check_leftovers(None, names)
    assert names[0] in m.what and "make clean" in m.fix


def test_the_kernel_probe_refuses_an_unknown_probe() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "topologies.kernel_probe", "warp"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 2 and "unknown probes ['warp']" in json.loads(out.stdout)["error"]


def test_a_probe_that_did_not_run_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "_probed", {})
    monkeypatch.setenv("PATH", "/nonexistent")  # no unshare: the probe cannot start
    results = preflight.probe_kernel(Target.BMV2)
    assert results and all("the probe did not run" in str(v) for v in results.values())
    assert preflight._probed == {}  # a failure to run is not cached as the kernel's answer


def test_every_feature_has_a_probe_and_a_release() -> None:
    assert [f.name for f in kernel_probe.FEATURES] == list(kernel_probe.PROBES)
    for f in kernel_probe.FEATURES:
        assert preflight.kernel_release_tuple(f.since) is not None and f.targets and f.what


def test_the_docs_list_each_feature_and_its_release() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "linux-target.md").read_text()
    for f in kernel_probe.FEATURES:
        assert f"`{f.name}`" in doc and f.since in doc, f.name


@pytest.mark.skipif(os.geteuid() == 0, reason="checks the message a user without root gets")
def test_without_root_the_pre_flight_says_so_and_runs_no_probe() -> None:
    missing = preflight.check(Target.LINUX)
    assert missing[0].what == "not root"


def test_a_probe_refused_is_a_result_and_the_rest_still_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused() -> None:
        raise RuntimeError("ip link add mrcprobe0 type veth ...: Operation not supported")

    calls: list[str] = []
    monkeypatch.setitem(kernel_probe.PROBES, "veth", refused)
    monkeypatch.setitem(kernel_probe.PROBES, "packet_rings", lambda: calls.append("rings"))
    out = kernel_probe.run(["veth", "htb", "packet_rings"])
    assert out["veth"] == "ip link add mrcprobe0 type veth ...: Operation not supported"
    assert out["htb"] == out["packet_rings"] == "not tried: no veth pair" and calls == []
    monkeypatch.setitem(kernel_probe.PROBES, "veth", lambda: None)
    monkeypatch.setitem(kernel_probe.PROBES, "htb", refused)
    out = kernel_probe.run(["veth", "htb", "packet_rings"])
    assert out["veth"] is None and out["htb"] and out["packet_rings"] is None and calls == ["rings"]
