"""Shims forked from one launcher are the same switches as shims started one by one.

Why: ``linux_target.launcher`` forks every shim of a fabric from one warm process (start-up
and memory at 128 switches). Each fork must still be a switch of its own: in its node's
network and mount namespaces (what tc mounts for the egress program stays in the node),
its own process (killing it takes no neighbour down; the supervisor restarts it through
the launcher and the controller re-syncs it), and nothing left behind when the fabric
goes: no launcher, no shim, no mount in the machine's own mount table.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mrc_fabric.time_scale import scaled
from topologies.clos import start_clos
from topologies.shim_launcher import LaunchedShim
from topologies.teardown import stop_fabric

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet namespaces)")


# A SIGKILLed process runs no more user code, but its exit waits for any kernel lock it is
# blocked on (uninterruptible sleep): a netlink call behind the RTNL that an earlier test's
# namespace teardown still holds can take seconds on a loaded two-core machine. The bound is
# for a kernel that never lets it go, not a measure of how fast shims die.
KILLED_EXIT_S = 60


def kernel_wait(pid: int) -> str:
    """Where the kernel holds ``pid`` (state and wait channel), for the failure message."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError as exc:
        return f"gone while reading /proc ({exc})"
    return f"state {state}, waiting in {wchan or '?'}"


def mounts() -> set[str]:
    return {" ".join(line.split()[3:5]) for line in Path("/proc/self/mountinfo").read_text().splitlines()}


def test_forked_shims_live_in_their_nodes_and_leave_nothing_behind(tmp_path: Path) -> None:
    before = mounts()
    net, topo = start_clos(tmp_path, 1, 2, 2, 1, node_prefix="ln", switches_per_shim=1)
    launcher = net.shim_launcher
    try:
        assert launcher is not None and launcher.alive()
        pids = {}
        for sw in topo.switches:
            node = net.get(sw.name)
            assert isinstance(node.shim, LaunchedShim)
            pids[sw.name] = node.shim.pid
            assert Path(f"/proc/{node.shim.pid}/stat").read_text().split()[3] == str(launcher.pid)
            for ns in ("net", "mnt"):
                shim_ns, node_ns = (os.readlink(f"/proc/{p}/ns/{ns}") for p in (node.shim.pid, node.pid))
                assert shim_ns == node_ns, (sw.name, ns)
        assert mounts() == before  # nothing of the shims mounted in the machine's mount table
        # one shim dies: its neighbours do not; a restart goes through the launcher again
        victim = net.get(topo.switches[0].name)
        os.kill(victim.shim.pid, signal.SIGKILL)
        try:
            status = victim.shim.wait(timeout=scaled(KILLED_EXIT_S))
        except subprocess.TimeoutExpired:
            pid = victim.shim.pid
            limit = scaled(KILLED_EXIT_S)
            pytest.fail(f"shim {pid} still there {limit:g} s after SIGKILL: {kernel_wait(pid)}")
        assert status == -signal.SIGKILL
        for sw in topo.switches[1:]:
            assert net.get(sw.name).shim.poll() is None
        victim.start_shim()
        assert isinstance(victim.shim, LaunchedShim) and victim.shim.pid != pids[victim.name]
        assert victim.shim.poll() is None
    finally:
        stop_fabric(net)
    assert not launcher.alive()
    deadline = time.monotonic() + scaled(5)
    while any(Path(f"/proc/{p}").exists() for p in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(Path(f"/proc/{p}").exists() for p in pids.values())
    assert mounts() == before
