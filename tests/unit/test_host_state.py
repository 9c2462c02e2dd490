"""The session-end check (tests/host_state.py) names what the suite left, not the machine's own."""

from __future__ import annotations

import host_state
import pytest
from host_state import HostState


def test_a_new_mount_is_left_behind_but_iproutes_own_run_netns_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`ip netns add` makes /run/netns a mount point once per boot and keeps it (a fresh VM
    meets that during the session); any other new mount is the session's."""
    before = HostState(mounts={"/ (ext4)"})
    after = HostState(mounts={"/ (ext4)", "/run/netns (tmpfs)", "/mnt/mrc-left (tmpfs)"})
    monkeypatch.setattr(host_state, "snapshot", lambda: after)
    monkeypatch.setattr(host_state, "session_processes", lambda tag: [])
    assert host_state.left(before, "tag") == ["mount /mnt/mrc-left (tmpfs)"]


def test_a_bpffs_stacked_over_systemds_is_a_leak() -> None:
    """systemd mounts a bpffs at /sys/fs/bpf; one more mounted over it and left is the suite's."""
    line = "{id} 22 0:{dev} / /sys/fs/bpf rw,nosuid shared:{id} - bpf bpf rw,mode=700"
    root = "21 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda rw"
    before = host_state.mount_keys("\n".join([root, line.format(id=30, dev=40)]))
    after = host_state.mount_keys("\n".join([root, line.format(id=30, dev=40), line.format(id=31, dev=41)]))
    assert before == {"/ (ext4)", "/sys/fs/bpf (bpf)"}
    assert after - before == {"/sys/fs/bpf (bpf) #2"}
