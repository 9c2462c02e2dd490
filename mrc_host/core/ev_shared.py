"""The EV set's share in its NIC's path verdicts (``path_health.py``): what it reports, and
how it applies what the NIC concluded.

A connection reports evidence about a path -- proved dead (``EvSet.retire``), a delivery on a
path the NIC holds dead (``nic_alive``) -- and reads the verdicts back when their version
moved (``nic_sync``): a path dead for its group is retired here (``NIC_PATH_DEAD``), one whose
verdict was revoked comes back (``NIC_PATH_CLEARED``). The NIC table never touches an EV; this class does, for
its own connection only.
"""

from __future__ import annotations

from typing import Final

from mrc_fabric.ev import T1_MASK, T1_SHIFT

from .ev_state import EvEvent, allowed
from .ev_table import EvTable
from .path_health import T1_BITS, NicPathHealth

# undo keys (``EvEntry.retired_for``) of EVs retired by the NIC's verdict: this less the path
# key (below every EV's key, >= 0, and every plane failure's, -1 - plane x MAX_INDEX - T1)
NIC_KEY_BASE: Final = -(1 << 40)


class SharedEvTable(EvTable):
    """An EV table that shares path verdicts with the other connections of its NIC."""

    def join_nic(self, nic: NicPathHealth, group: int) -> None:
        """Share path verdicts with the NIC's other connections; ``group`` names the
        destination T0 (the downlink every path of this connection ends on)."""
        self.nic = nic
        self.nic_group = group
        self._nic_paths = nic.paths

    def nic_alive(self, ev: int, sent_ns: int) -> None:
        """Something sent on ``ev`` at ``sent_ns`` was delivered: the NIC revokes a verdict it
        contradicts."""
        nic = self.nic
        if nic is not None and nic.alive(self.nic_group, ev >> T1_SHIFT, sent_ns):
            self.nic_changed = True

    def nic_sync(self, now_ns: int) -> list[tuple[int, int, int]]:
        """Apply the NIC's verdicts to this set. A path dead for this connection's group is
        retired (``NIC_PATH_DEAD``, with its backups: they take the same path) -- unless this
        connection had something sent on it since the loss the verdict stands on delivered
        (then it tells the NIC, which revokes it), or ``ev_min_active`` holds (the verdict is
        another connection's evidence, not this one's). A path retired so whose verdict was
        revoked comes back at once (``NIC_PATH_CLEARED``). Returns the paths newly retired,
        (plane, T1, send time of the loss the verdict stands on), whose packets in flight the
        sender is to judge."""
        nic = self.nic
        if nic is None:
            return []
        self.nic_version = nic.version
        dead = nic.dead_for(self.nic_group)
        for x in list(self.retired.values()):
            key = x.retired_for
            if key is not None and key[0] <= NIC_KEY_BASE and NIC_KEY_BASE - key[0] not in dead:
                x.retired_for = None
                x.probe_id = None
                self._fire(x, EvEvent.NIC_PATH_CLEARED, "the NIC's verdict was revoked")
                x.last_ok_ns = now_ns
                self._place_good(x)
        newly: list[tuple[int, int, int]] = []
        for path, since in dead.items():
            plane, t1 = path >> T1_BITS, path & T1_MASK
            if plane >= self.planes or t1 >= self.paths.t1_count:
                continue
            victims = [
                x
                for x in (*self.active[plane], *self.backup[plane])
                if x.t1 == t1 and x.member and allowed(x.state, EvEvent.NIC_PATH_DEAD)
            ]
            if not victims:
                continue
            here = max(x.ok_sent_ns for x in self.entries.values() if x.plane == plane and x.t1 == t1)
            if here >= since:
                self.nic_alive(victims[0].value, here)  # it delivered since: not dead for us
                continue
            if any(x.active for x in victims) and not self._may_shrink(plane, t1):
                self.floor_holds += 1
                continue
            why = f"path p{plane}-t1_{t1} dead at the NIC (loss of a packet sent at {since} ns)"
            for x in victims:
                self._retire_one(x, why, now_ns, EvEvent.NIC_PATH_DEAD)
                x.retired_for = (NIC_KEY_BASE - path, since)
            newly.append((plane, t1, since))
        return newly
