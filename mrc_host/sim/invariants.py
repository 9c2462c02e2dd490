"""The fuzzer's invariants: judges of one run's observations (``fuzz_observe.py``).

Each checker takes the observations dict and returns a ``Verdict``: how many subjects it
judged, every violation (subject, value, limit) and the worst case it saw, violated or not.
They read nothing else, so a hand-made dict that breaks one is a unit test of it.

- ``data``: every write completed, acknowledged as good, and the receiver holds its bytes.
- ``floor``: each failure (each down phase of a flap) cost each connection at most
  ``1.3 x floor + 1`` DATA packets; its floor is its DATA packets that entered the failed
  element in its base RTT before the failure (or the mean of the four before, if more), those
  still queued in it from earlier, and for one younger than a base RTT at the failure what it
  lost there in its first 1.5 RTT (``fuzz_observe.Observer._failure``). Per connection, as the
  benches count: summed per fault, a connection that sent nothing through the element in
  that RTT would have to lose nothing there, which no transport without shared state can do.
- ``resend``: a connection none of whose packets (either way) the fabric dropped or trimmed
  resent nothing.
- ``oracle``: where the receiver's last hop queued (a quarter of a base RTT or more) when the
  failure's first lost packet would have arrived, each connection lost at most
  ``1.25 x oracle_sent + 2`` DATA packets there: its packets sent before a report of the
  receiver's could reach it (``fuzz_observe.Observer._oracle``); the floor says little there.
- ``dead_ev``: once a connection alive at the failure lost DATA on a dead path, no sender EV
  of that path is GOOD from 5 of its RTTs later until the path comes back or the connection
  is done, and none turns GOOD again once all were out (an undone loss, a probe); the RTT is
  its smoothed RTT at the loss (its first sample if it had none yet), at least the base RTT.
- ``jain``: connections into one host with one base RTT, alone on their leaves and untouched
  by faults, share its goodput with Jain's index at least 0.9 over the time all of them run.
- ``slow_plane``: a connection alone on a fabric whose planes run at unequal rates gives each
  plane a share of its bytes within 0.05 of the plane's share of the capacity.
- ``flap``: a job with links flapping takes at most 1.1 x as long as without the flaps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

FLOOR_FACTOR = 1.3
FLOOR_SLACK = 1
ORACLE_FACTOR = 1.25
ORACLE_SLACK = 2
DEAD_EV_RTTS = 5
JAIN_MIN = 0.9
SHARE_TOLERANCE = 0.05  # a plane's share of the bytes against its share of the capacity
SHARE_MIN_RTTS = 20  # judged for connections whose bytes take this many base RTTs at capacity
FLAP_JCT_MAX = 1.1
FLAP_MIN_RTTS = 50  # judged for jobs that take this many base RTTs without the flap


@dataclass
class Case:
    """One judged subject: its value against the limit (``bad``: on the wrong side of it)."""

    subject: str
    value: float
    limit: float
    bad: bool
    detail: str = ""


@dataclass
class Verdict:
    invariant: str
    checked: int = 0
    violations: list[Case] = field(default_factory=list)
    worst: Case | None = None
    worst_key: float = field(default=float("-inf"), repr=False)  # larger is worse

    def judge(self, case: Case, key: float) -> None:
        """Count ``case``; keep it as the worst if ``key`` (larger is worse) beats the last."""
        self.checked += 1
        if case.bad:
            self.violations.append(case)
        if self.worst is None or key > self.worst_key:
            self.worst, self.worst_key = case, key

    def as_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "violations": [asdict(v) for v in self.violations],
            "worst": asdict(self.worst) if self.worst else None,
        }


def check_data(obs: dict[str, Any]) -> Verdict:
    v = Verdict("data")
    for f in obs["flows"]:
        missing = f["writes"] - f["writes_done"]
        bad = missing > 0 or not f["data_ok"]
        why = f"{missing} of {f['writes']} writes not done" if missing else ("bytes differ" if bad else "")
        v.judge(Case(f["name"], float(missing + (not f["data_ok"])), 0.0, bad, why), float(bad))
    return v


def floor_limit(floor: float) -> float:
    return FLOOR_FACTOR * floor + FLOOR_SLACK


def check_floor(obs: dict[str, Any]) -> Verdict:
    """Per failure and per connection that met the failed element (as the benches count it:
    packets lost per connection per fault against that connection's floor); not where the
    receiver's last hop queued (``check_oracle`` judges those)."""
    v = Verdict("floor")
    for f in obs["failures"]:
        if not f["reached"]:
            continue  # the run ended before this failure
        where = f"{f['fault']}" + (f" phase {f['phase']}" if f["kind"] == "flap" else "")
        for x in f["flows"]:
            if x.get("under_queue"):
                continue
            limit = floor_limit(x["floor"])
            lost = x["lost"]
            srtt = f", smoothed RTT then {x['srtt_ns'] / 1e3:.1f} us" if x.get("srtt_ns") else ""
            detail = (
                f"lost {lost}, floor {x['floor']} ({x['entered']} entered, {x['queued']} queued, "
                f"{x['first_rtt']} lost in its first RTT){srtt}"
            )
            v.judge(Case(f"{x['flow']} ({where})", float(lost), limit, lost > limit, detail), lost / limit)
    return v


def oracle_limit(sent: float) -> float:
    return ORACLE_FACTOR * sent + ORACLE_SLACK


def check_oracle(obs: dict[str, Any]) -> Verdict:
    """Per failure and connection under a queue (the receiver's last hop waited a quarter of
    its base RTT or more when the first lost packet would have arrived): DATA lost at most
    ``1.25 x oracle_sent + 2``, the oracle being what no endpoint could save
    (``fuzz_observe.Observer._oracle``)."""
    v = Verdict("oracle")
    for f in obs["failures"]:
        if not f["reached"]:
            continue
        where = f"{f['fault']}" + (f" phase {f['phase']}" if f["kind"] == "flap" else "")
        for x in f["flows"]:
            if not x.get("under_queue"):
                continue
            limit = oracle_limit(x["oracle_sent"])
            lost = x["lost"]
            detail = (
                f"lost {lost}, oracle_sent {x['oracle_sent']}, last hop queue {x['queue_ns'] / 1e3:.1f} us"
            )
            v.judge(Case(f"{x['flow']} ({where})", float(lost), limit, lost > limit, detail), lost / limit)
    return v


def check_slow_plane(obs: dict[str, Any]) -> Verdict:
    """A connection alone on a fabric whose planes run at unequal rates sends each plane a share
    of its bytes within 0.05 of that plane's share of the capacity (if its bytes take
    ``SHARE_MIN_RTTS`` base RTTs or more at the planes' summed rate)."""
    v = Verdict("slow_plane")
    for r in obs.get("slow_planes", []):
        if r["ideal_rtts"] < SHARE_MIN_RTTS:
            continue
        err = max(abs(a - b) for a, b in zip(r["share"], r["capacity_share"], strict=True))
        detail = f"shares {r['share']} against capacity {r['capacity_share']} ({r['capacity_gbps']} Gb/s)"
        v.judge(Case(r["flow"], round(err, 4), SHARE_TOLERANCE, err > SHARE_TOLERANCE, detail), err)
    return v


def check_flap(obs: dict[str, Any]) -> Verdict:
    """A job with a link flapping takes at most 1.1 x as long as without the flap (the same
    draw, its flaps removed: ``fuzz.run_checked``), if it takes ``FLAP_MIN_RTTS`` base RTTs."""
    v = Verdict("flap")
    for j in obs.get("flap_jobs", []):
        if j["clean_ns"] < FLAP_MIN_RTTS * j["base_rtt_ns"]:
            continue
        ratio = j["flap_ns"] / j["clean_ns"]
        detail = f"{j['flap_ns'] / 1e3:.1f} us against {j['clean_ns'] / 1e3:.1f} us without the flap"
        v.judge(Case(j["job"], round(ratio, 4), FLAP_JCT_MAX, ratio > FLAP_JCT_MAX, detail), ratio)
    return v


def check_resend(obs: dict[str, Any]) -> Verdict:
    v = Verdict("resend")
    for f in obs["flows"]:
        if f["fabric_drops"] or f["fabric_trims"]:
            continue
        n = f["resends"]
        v.judge(Case(f["name"], float(n), 0.0, n > 0, f"{n} resent, none dropped or trimmed"), float(n))
    return v


def check_dead_ev(obs: dict[str, Any]) -> Verdict:
    v = Verdict("dead_ev")
    for p in obs["dead_paths"]:
        if p.get("born_after_ns", 0) > 0:
            continue  # (it began after the failure: nothing to have learnt it from)
        rtt = p["rtt_ns"]
        lost = p["first_loss_ns"]
        deadline = lost + DEAD_EV_RTTS * rtt
        alive = p["alive_ns"]
        back = [iv for iv in alive if iv[0] > lost]  # GOOD again after it was out: never, while dead
        if p["until_ns"] <= deadline and not back:
            continue  # the path came back or the connection finished before the deadline
        bad = [iv for iv in alive if iv[1] > deadline or iv in back]
        last = max((iv[1] for iv in alive), default=lost)
        value = (last - lost) / rtt  # RTTs from the first loss to the last moment it was GOOD
        plane, t1 = p["path"]
        subject = f"{p['flow']} p{plane}-t1_{t1} ({p['fault']}" + (
            f" phase {p['phase']})" if p["phase"] else ")"
        )
        detail = (
            f"GOOD {[[round((a - lost) / rtt, 1), round((b - lost) / rtt, 1)] for a, b in bad]} RTT "
            f"after its first loss (RTT {rtt / 1e3:.1f} us, base {p['base_rtt_ns'] / 1e3:.1f} us)"
            + (", back while dead" if back else "")
            + _dead_ev_context(p)
            if bad
            else ""
        )
        v.judge(Case(subject, round(value, 2), float(DEAD_EV_RTTS), bool(bad), detail), value)
    return v


def _dead_ev_context(p: dict[str, Any]) -> str:
    """What the judgement does not weigh but a reader of a failing draw needs: a connection that
    began after the failure had nothing to learn it from, and an RTT that grew since the loss
    (an incast's queue building) makes 5 RTTs at the loss fewer round trips of its own."""
    out = ""
    born = p.get("born_after_ns")
    if born is not None and born > 0:
        out += f"; began {born / 1e3:.1f} us after the failure"
    late = p.get("rtt_late_ns")
    if late is not None and late > 1.25 * p["rtt_ns"]:
        out += f"; RTT {late / 1e3:.1f} us at the deadline"
    return out


def check_jain(obs: dict[str, Any]) -> Verdict:
    v = Verdict("jain")
    for g in obs["fair_groups"]:
        if g["skipped"] or g["jain"] is None:
            continue
        subject = f"into h{g['dst']}: {', '.join(g['flows'])}"
        detail = f"Gb/s {g['gbps']} over {(g['end_ns'] - g['start_ns']) / 1e3:.1f} us"
        v.judge(Case(subject, g["jain"], JAIN_MIN, g["jain"] < JAIN_MIN, detail), -g["jain"])
    return v


CHECKS: dict[str, Callable[[dict[str, Any]], Verdict]] = {
    "data": check_data,
    "floor": check_floor,
    "oracle": check_oracle,
    "resend": check_resend,
    "dead_ev": check_dead_ev,
    "jain": check_jain,
    "slow_plane": check_slow_plane,
    "flap": check_flap,
}


def check_all(obs: dict[str, Any]) -> dict[str, Verdict]:
    return {name: check(obs) for name, check in CHECKS.items()}
