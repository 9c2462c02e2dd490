"""What one NIC knows of its paths' health, shared by all its queue pairs.

Why: a T1 that stops forwarding is crossed by every connection of a host toward every other
T0. Alone, each connection learns the failure from its own losses -- a connection with a
few packets in flight on the dead path often only by its retransmission timeout. One NIC
holds every one of its connections' state, so what one of them proved about a path can
serve the others (``Experimental.share_path_health``; off, each learns alone).

What is shared is what is shared physically. A path (plane, T1) from this host to a
destination T0 crosses the host's T0 uplink to that T1, the T1, and the T1's downlink to
the destination's T0. The uplink and the T1 are common to all the host's destinations;
the downlink only to the destinations behind that T0 -- a connection's *group* (any key
naming the destination T0; a destination under the host's own T0 crosses no T1 and joins
no group). So a verdict has a scope:

- one connection proves a path dead (it delivered nothing sent at or after a lost packet
  while other paths delivered later ones, or a liveness probe went unanswered): the path
  is dead for its group -- the downlink, at least, may be the culprit;
- two groups find the same (plane, T1) dead, each after the last delivery anyone proved on
  it: the uplink or the T1 is; the path is dead for every group (``WIDE``).

A verdict is cheap to revoke: any delivery on the path of a packet sent at or after the
loss it stands on (a SACKed packet, a late original, an answered probe) clears it for that
group, and clears the wide verdict from any group (the uplink and the T1 work). Congestion
at one destination therefore never retires a path for the others: a wide verdict needs two
groups, and the first delivery elsewhere revokes it.

One owner per state machine: connections report evidence here (``dead``, ``alive``) and
read the verdicts (``dead_for``); each connection's EV set applies them to its own EVs.
The table changes nobody's state; ``version`` tells a connection that it has something to
read, and the endpoint that changed it says so (``PathHealthChanged``) so the caller can
wake the NIC's other endpoints.
"""

from __future__ import annotations

from typing import Final

from mrc_fabric.ev import PLANE_SHIFT, T1_MASK, T1_SHIFT

T1_BITS: Final = PLANE_SHIFT - T1_SHIFT  # a path key is the EV's plane and T1 bits: ``ev >> T1_SHIFT``
WIDE: Final = -1  # the group of a verdict for every destination (the uplink or the T1 failed)


def path_key(ev: int) -> int:
    """The (plane, T1) path of ``ev`` as one integer: its bits above the entropy."""
    return ev >> T1_SHIFT


class PathRecord:
    """What the NIC knows of one (plane, T1) path: the groups it is dead for, and when."""

    def __init__(self) -> None:
        self.dead: dict[int, int] = {}  # group (or WIDE) -> send time of the loss it stands on
        self.cleared_ns = -1  # the latest send time a delivery proved on it, in any group


class NicPathHealth:
    """The shared path verdicts of one NIC (one per simulated host, one per agent)."""

    def __init__(self) -> None:
        self.version = 0  # bumped on every change of a verdict
        # path key (``path_key``: the EV's plane and T1 bits) -> its record; only paths some
        # connection proved dead are here, so a delivery elsewhere costs one dict look-up
        self.paths: dict[int, PathRecord] = {}
        self.verdicts = 0  # verdicts made (dead for a group, or wide)
        self.revoked = 0  # verdicts a delivery revoked

    def _record(self, path: int) -> PathRecord:
        rec = self.paths.get(path)
        if rec is None:
            rec = self.paths[path] = PathRecord()
        return rec

    def dead(self, group: int, path: int, since_ns: int) -> bool:
        """A connection of ``group`` proved ``path`` dead for a packet sent at ``since_ns``.
        True when a verdict changed."""
        rec = self._record(path)
        if WIDE in rec.dead or since_ns <= rec.cleared_ns:
            return False  # dead for everyone already; or delivered later than that loss
        old = rec.dead.get(group)
        if old is not None and old <= since_ns:
            return False
        rec.dead[group] = since_ns
        self.verdicts += 1
        self._judge_wide(rec)
        self.version += 1
        return True

    def _judge_wide(self, rec: PathRecord) -> None:
        """Dead for every group once two groups found it dead: since the first of those losses."""
        if WIDE not in rec.dead and len(rec.dead) >= 2:
            rec.dead[WIDE] = min(rec.dead.values())
            self.verdicts += 1

    def alive(self, group: int, path: int, sent_ns: int) -> bool:
        """A connection of ``group`` had a packet sent on ``path`` at ``sent_ns`` delivered.
        True when a verdict was revoked."""
        rec = self.paths.get(path)
        if rec is None:
            return False
        if sent_ns > rec.cleared_ns:
            rec.cleared_ns = sent_ns
        changed = False
        wide = rec.dead.get(WIDE)
        if wide is not None and sent_ns >= wide:
            del rec.dead[WIDE]  # the uplink and the T1 deliver; downlinks judged per group
            changed = True
        own = rec.dead.get(group)
        if own is not None and sent_ns >= own:
            del rec.dead[group]
            changed = True
        if changed:
            self.revoked += 1
            self.version += 1
        if not rec.dead:
            del self.paths[path]
        return changed

    def dead_for(self, group: int) -> dict[int, int]:
        """Every path dead for ``group``: path key -> send time of the loss the verdict stands on."""
        out: dict[int, int] = {}
        for path, rec in self.paths.items():
            since = rec.dead.get(WIDE)
            own = rec.dead.get(group)
            if since is None or (own is not None and own < since):
                since = own
            if since is not None:
                out[path] = since
        return out

    def as_dict(self) -> dict[str, object]:
        """The standing verdicts and how many were made and revoked (for reports)."""
        return {
            "verdicts": self.verdicts,
            "revoked": self.revoked,
            "dead": {
                f"p{path >> T1_BITS}-t1_{path & T1_MASK}": sorted(
                    "all" if g == WIDE else str(g) for g in rec.dead
                )
                for path, rec in self.paths.items()
            },
        }
