"""Linux switches load their egress program whatever BPF filesystem the machine has.

systemd mounts a bpffs at /sys/fs/bpf at every boot of Debian and Ubuntu. In a Mininet node
that mount still shows in /proc/mounts after ``mnexec`` put a fresh sysfs over /sys, and tc's
loader, trusting the listing, could not load the program there. Each case below is the machine
as the fabric finds it, made in a private mount namespace of its own (so it never reaches this
machine): no bpffs, systemd's, and one with stale pins where tc keeps its maps (``tc/globals``,
under the program's own map names). A small fabric starts in it: every switch port must carry
the egress program, and the bpffs must hold exactly what it held before (nothing pinned,
nothing removed).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mrc_fabric.time_scale import scaled

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
PREFIX = "bf"
STALE = "/sys/fs/bpf/tc/globals"
MACHINES = {
    "no bpffs": "true",
    "systemd's bpffs": "mount -t bpf bpf /sys/fs/bpf",
    "a bpffs with stale pins": (
        f"mount -t bpf bpf /sys/fs/bpf && mkdir -p {STALE} && "
        f"bpftool map create {STALE}/mrc_state type array key 4 value 8 entries 1 name mrc_state && "
        f"bpftool map create {STALE}/mrc_link type array key 4 value 16 entries 1 name mrc_link"
    ),
}

# runs inside the case's mount namespace: a 1-plane fabric with one T0 and one T1
FABRIC = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from topologies.clos import start_clos
    from topologies.teardown import stop_fabric

    def pins():
        root = Path("/sys/fs/bpf")
        return sorted(str(p) for p in root.rglob("*")) if os.path.ismount(root) else []

    before = pins()
    net, topo = start_clos(sys.argv[1], 1, 1, 1, 1, node_prefix=sys.argv[2])
    try:
        programs = {}
        for sw in topo.switches:
            hooks = json.loads(net.get(sw.name).cmd("bpftool -j net show").strip() or "[]")
            programs[sw.name] = sorted(h["devname"] for n in hooks for h in n.get("tc", [])
                                       if h.get("kind") == "clsact/egress")
        ports = {sw.name: sorted(e.ifname for e in topo.ports_of(sw.name)) for sw in topo.switches}
    finally:
        stop_fabric(net)
    print(json.dumps({"before": before, "after": pins(), "programs": programs, "ports": ports}))
    """
)


@pytest.mark.parametrize("machine", list(MACHINES))
def test_every_switch_port_gets_its_egress_program_and_the_bpffs_is_left_alone(
    machine: str, tmp_path: Path
) -> None:
    mounts = Path("/proc/1/mountinfo").read_text()
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
         f'{MACHINES[machine]} && exec "$@"', "sh", sys.executable, "-c", FABRIC, str(tmp_path), PREFIX],
        cwd=REPO, capture_output=True, text=True, timeout=scaled(180),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["programs"] == seen["ports"] and seen["ports"], seen
    assert seen["after"] == seen["before"], seen  # stale pins kept, nothing new pinned
    if machine == "a bpffs with stale pins":
        assert f"{STALE}/mrc_state" in seen["before"]
    assert Path("/proc/1/mountinfo").read_text() == mounts  # the case's bpffs never left its namespace
