"""Transport parameters: one frozen dataclass per concern, every default documented.

The defaults suit the simulator's fabric (100 Gb/s links, a base RTT of a few
microseconds). ``TransportConfig.for_rtt`` derives every timer from one base RTT so an
agent running over Mininet (RTTs of a millisecond) gets consistent values.
docs/transport.md explains each knob.

Every default is here, and so is what the drivers change: mrc-sim's network and the agent's
pacer report when each DATA packet leaves its NIC port, and turn on what depends on it
(``reported_departures``). A researcher's switches -- mechanisms under study, off in what
the product runs -- are apart, in ``TransportConfig.experimental`` (``Experimental``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Final

from mrc_fabric.ev import ENTROPY_MASK, EV
from mrc_host.wire.messages import PSN_MASK

if TYPE_CHECKING:  # imported where a profile is expanded: a run without one never loads it
    from .ev_fields import EvDeny, ExpProfile, GenProfile


class Mode(enum.StrEnum):
    """How a connection uses paths. Same code, different policy switches."""

    MRC = "mrc"  # spray over GOOD EVs, retire on loss, probe back, SKIP on ECN/trim
    SINGLE_PATH = "single-path"  # one EV for the whole connection, go-back-N (RoCE-like)
    ECMP = "ecmp"  # random EVs hashed by switches; no retirement, no SKIP


# EVs drawn per connection when nothing says otherwise: the one default of the core, the
# agent, mrc-sim and its scenarios (each of them reads it from here)
DEFAULT_MAX_EVS: Final = 128
# the most EVs a connection may draw, and an EV profile generate (OCP's example: 256 x 16 x 16)
MAX_PROFILE_EVS: Final = 65_536

# UET scales NSCC's increments by the BDP over its reference fabric's: 100 Gb/s x 12 us
UET_REFERENCE_BDP: Final = 150_000
UET_REFERENCE_RTT: Final = 12_000


def uet_fi(mtu: int, network_bdp: int) -> int:
    """UET's fair increase (htsim's uec.cpp): 5 packets per RTT at the reference BDP, scaled
    by the fabric's BDP; at least one packet."""
    return max(mtu, round(5 * mtu * network_bdp / UET_REFERENCE_BDP))


def uet_eta(mtu: int, network_bdp: int, target_delay: int) -> float:
    """UET's proportional increase at zero delay: 4 packets per window times the target delay
    over the reference RTT (UET's alpha is 4 MTU x the BDP's and the target's scaling over the
    target, and adds alpha x (target - delay) per window), scaled by the fabric's BDP; at
    least one packet. So a lower target also grows the window slower below it."""
    return max(float(mtu), 4.0 * mtu * network_bdp / UET_REFERENCE_BDP * target_delay / UET_REFERENCE_RTT)


@dataclass(frozen=True, slots=True)
class CcParams:
    """NSCC-like window congestion control (ECN fraction + delay against a target).

    Four cases per acknowledgement, as in UET NSCC:
    - no ECN, delay below target  -> proportional increase (fast, scaled by the headroom);
    - no ECN, delay above target  -> fair increase (about ``fair_increase_bytes`` per RTT);
    - ECN, delay above target     -> multiplicative decrease, at most once per base RTT;
    - ECN, delay below target     -> no change (the mark came from a transient queue).
    A trim NACK removes one MTU from the window. Loss without a trim does not touch the
    window: MRC reads it as a path failure, which retirement handles.
    """

    base_rtt_ns: int = 4_000
    target_delay_ns: int = 2_000  # queueing delay allowed above base_rtt
    max_cwnd_bytes: int = 256 * 1024
    min_cwnd_bytes: int = 4096
    initial_cwnd_bytes: int = 0  # 0: start at max_cwnd (a data-centre NIC starts at line rate)
    proportional_gain: float = 0.5  # fraction of acked bytes added at zero delay
    fair_increase_bytes: int = 4096  # added per RTT worth of acks when above target
    md_gain: float = 0.5  # largest fraction removed by one multiplicative decrease
    ecn_alpha: float = 1 / 16  # EWMA gain of the ECN-marked fraction (reported, scales MD)


@dataclass(frozen=True, slots=True)
class NsccParams:
    """UET NSCC (``cc_algorithm="nscc"``), parameters named as the OCP NSCC profile.

    Times are in ns, sizes in bytes. Per acknowledgement, with ``delay`` the RTT sample
    minus ``base_rtt`` and ``avg_delay`` its moving average:
    - no ECN, delay below ``target_delay`` -> proportional increase, additive: ``eta`` bytes
      per window acked (``for_rtt``: UET's 4 packets x the target over its reference RTT of
      12 us, scaled as ``fi``), times the headroom (target - delay) / target; once a whole
      window has been acked at almost no delay, fast increase: ``fi_scale`` bytes per acked
      byte;
    - no ECN, delay above target -> fair increase, about ``fi`` bytes per window acked
      (``for_rtt``: UET's 5 packets per reference BDP of 100 Gb/s x 12 us, scaled), and
      both increases times (RTT / (``network_rtt`` + delay))^2 when ``network_rtt`` is longer;
    - ECN, delay above target -> multiplicative decrease by ``gamma`` x (avg_delay -
      target) / avg_delay, at most ``max_md_jump`` of the window, at most once per base RTT;
    - ECN, delay below target -> no change (a transient queue);
    - no ECN, but a standing queue (the average delay less 8 times the mean difference
      between successive samples, each sample less its wait at the sender's own port) above
      half the target (the last hop, which marks nothing) -> the window sheds the excess's
      share of the round trip (``gamma``, ``max_md_jump``), at most once a round trip, both
      of max(base_rtt, ``lasthop_delay``) plus that queue; any standing queue below that
      leaves the proportional increase alone (no fair or fast increase); with
      ``lasthop_share_scale`` a larger window is marked from a lower queue;
    the window cap is ``bdp`` + 2 ``min_cwnd`` plus the line rate times the RTT's spread
    (average - floor delay), at most ``max_cwnd`` (``bdp`` 0: ``max_cwnd`` alone);
    increases are gathered and applied every ``adjust_bytes_threshold`` acked bytes or
    ``adjust_period_threshold`` ns. Quick adapt: when, in a period of base_rtt +
    target_delay after a trim, a loss, a timeout or an average delay above
    ``qa_threshold`` x target, fewer than cwnd / 2**``qa_gate`` bytes were acknowledged,
    the window drops at once to what was acknowledged.
    """

    base_rtt: int = 4_000
    target_delay: int = 2_000
    eta: float = 4 * 4096.0  # bytes per window acked at zero delay (``for_rtt``: ``uet_eta``)
    fi: int = 4096
    fi_scale: float = 0.5
    gamma: float = 0.8
    max_md_jump: float = 0.5
    max_cwnd: int = 256 * 1024
    bdp: int = 0  # not in the OCP profile: base_rtt x line rate, the window with no spread
    # not in the OCP profile: the fabric's longest base RTT, the period of the delay floor and of
    # the last-hop signal's decreases (flows of every RTT cut alike)
    lasthop_delay: int = 4_000
    # not in the OCP profile: a standing queue where nothing marks (the last hop) counts as a
    # mark from half the target (False: UET's rules alone)
    lasthop_signal: bool = True
    qa_gate: int = 2
    qa_threshold: float = 4.0
    adjust_bytes_threshold: int = 16 * 1024
    adjust_period_threshold: int = 4_000
    min_cwnd: int = 4096  # not in the OCP profile: the window never goes below one packet
    # not in the OCP profile (UET's network RTT): the fabric's longest base RTT; a flow with a
    # shorter one scales its increments by (RTT / this)^2 at the same delay. 0: its own
    network_rtt: int = 0
    initial_cwnd: int = 0  # not in the OCP profile: 0 starts at max_cwnd (line rate)
    delay_weight: float = 0.125  # not in the OCP profile: EWMA gain of avg_delay
    fast_increase_delay: float = 0.1  # "almost no delay": below this fraction of target_delay


@dataclass(frozen=True, slots=True)
class RcccParams:
    """Receiver credits (UET's RCCC), used by ``cc_algorithm`` "nscc+rccc" (NSCC's window and
    credits both) and "rccc" (credits alone). The receiver's NIC paces CREDITs of ``quantum``
    bytes, round robin among the senders that asked (``credit_rx.py``), at ``rate_share`` of its
    rate: senders into one host share its port whatever their RTT or start. A sender may send
    ``speculative_bdps`` of its BDP before anything comes back (at its start, and after being
    idle), then only with credit (``credit_tx.py``)."""

    quantum: int = 16384  # payload bytes per CREDIT (UET's 4 packets of 4 KiB)
    rate_share: float = 0.98  # credits are paced at this share of the receiving NIC's rate (a queue drains)
    speculative_bdps: float = 0.25  # sent unscheduled before the first NACK or CREDIT
    max_balance_bdps: float = 1.5  # credit held unused beyond this is dropped (asked again when needed)
    # quanta asked for beyond the need while there is any: a loss at the tail is resent at once
    reserve_quanta: int = 2
    # the receiving NIC's rate in Gb/s, all ports together; 0: ``port_gbps`` x planes (unknown too:
    # credits are granted as they are asked for, unpaced)
    nic_gbps: float = 0.0


@dataclass(frozen=True, slots=True)
class EvProfile:
    """Which EVs a connection may draw (the OCP EV profile's generation rules).

    The EV format is fixed by the contract (docs/design.md §3: plane and T1 choose the path, the low
    14 bits ride in the UDP source port, the high 18 in the flow label); a profile only
    narrows the values: ``explicit`` lists the EVs to use (each must fit the path space; the
    first ``max_evs / planes`` of each plane are active, the rest backups), ``generated``
    draws them from an OCP generated profile's values and ``fielded`` from an OCP explicit
    profile's (compact EVs expanded through fields), otherwise EVs are drawn with entropy
    ``entropy_base | (random & entropy_mask)``, so a researcher can pin the
    entropy bits an ECMP hash would see, or give every EV of a path the same entropy.
    """

    explicit: tuple[int, ...] = ()
    entropy_mask: int = ENTROPY_MASK
    entropy_base: int = 0
    # OCP generated profile (format fields, per-field init/min/max/mask, denials): the EVs
    # are drawn from what it generates (mrc_host/core/ev_fields.py)
    generated: GenProfile | None = None
    # OCP explicit profile (fields, a list or a contiguous range of compact EVs, denials)
    fielded: ExpProfile | None = None
    # EVs drawn that match one of these are DENIED from the start (replaced by backups)
    deny: tuple[EvDeny, ...] = ()

    def __post_init__(self) -> None:
        if sum((bool(self.explicit), self.generated is not None, self.fielded is not None)) > 1:
            raise ValueError("explicit and generated: a profile lists its EVs or generates them, not both")
        if not 0 <= self.entropy_mask <= ENTROPY_MASK:
            raise ValueError(f"entropy_mask {self.entropy_mask:#x} is not within {ENTROPY_MASK:#x}")
        if not 0 <= self.entropy_base <= ENTROPY_MASK or self.entropy_base & self.entropy_mask:
            raise ValueError(f"entropy_base {self.entropy_base:#x} must be 18 bits outside entropy_mask")
        if len(set(self.explicit)) != len(self.explicit):
            raise ValueError("explicit: an EV is listed twice")
        for v in self.explicit:
            EV.decode(v)  # raises on a value that is not a 32-bit EV

    def entropy(self, random_bits: int) -> int:
        return self.entropy_base | (random_bits & self.entropy_mask)


@dataclass(frozen=True, slots=True)
class Experimental:
    """A researcher's switches: mechanisms under study, each off by default -- what the product
    runs. Measured, each made something better and something else worse (said below);
    kept so that its trade-off can be seen and changed. A scenario's ``[transport.config]`` or
    ``[transport.nscc]`` table, ``mrc-sim --share-paths`` and ``TransportConfig.for_rtt`` name
    them directly: ``split_experimental`` routes each name here."""

    # MRC: path verdicts are shared with the other connections of the NIC (``path_health.py``,
    # given by the caller): a path one proved dead is retired by those toward the same T0, by
    # all once connections toward two T0s did. Off: each connection learns alone (on, two of
    # the fuzzer's CI draws got worse: a plane lost at a host's own T0 or NIC link cost 2
    # packets more, a bystander flow resent 2 packets its changed queues reordered)
    share_path_health: bool = False
    # NSCC (not in the OCP profile): the last-hop mark's threshold scaled by the flow's window,
    # as Swift scales its target: half the target x min(1, this / sqrt(cwnd / bdp)). At 0.35 a
    # window of a whole BDP is marked from 0.35 x half the target, one of an eighth of it
    # (eight equal flows) from half the target: unequal windows cut at different queues and
    # meet (staggered equal flows fairer), but an incast under a black hole loses more against
    # its floor. 0: off
    lasthop_share_scale: float = 0.0
    # NSCC (not in the OCP profile): on a standing last-hop queue the window follows FAST TCP's
    # update instead of the mark (``Nscc._lasthop_own_queue``): each flow aims to keep this
    # share of half the target's line-rate bytes queued there (less above half the target), so
    # equal flows meet at equal windows however they started. At 1.0 equal flows, together or
    # staggered, 2-8 of them on 1 or 2 planes, share at Jain >= 0.95 (``bench.sim_fair``), but
    # the queue an incast holds is deeper and a path that dies under it loses more. Takes
    # precedence over the share scale. 0: off
    lasthop_queue_share: float = 0.0
    # MRC: the SACK gap rule's time guard also waits out the packet's own path's latest delay
    # (``PathWatch.due``): a packet on a path queued deeper than the one that overtook it is
    # not lost before that path's delay has passed, unless the path has gone quiet, nor on a
    # plane the queue weights hold back (its guessed losses' late copies time it). Under a
    # flapping link (``bench.sim_flap``, 64 MiB, seeds 1-10) spurious losses fell from 0-35 a
    # seed to 0-6 (0 on 6 seeds), the worst phase from a median of 1.05 to 1.03 x its limit,
    # the job time a tie; the fuzzer's failing draws moved by one or two each way. Off
    path_delay_losses: bool = False


EXPERIMENTAL_KEYS: Final = frozenset(f.name for f in fields(Experimental))


def split_experimental(overrides: dict[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """``overrides`` (a table of parameters by name) as (the others, the experimental switches)."""
    rest = {k: v for k, v in overrides.items() if k not in EXPERIMENTAL_KEYS}
    return rest, {k: v for k, v in overrides.items() if k in EXPERIMENTAL_KEYS}


# DATA packets per plane a queue pair may have waiting at a NIC that reports departures
# (``nic_backlog``): its next packet is always ready when the port frees, no more (each
# carries an EV chosen that late)
NIC_BACKLOG_PER_PLANE: Final = 2


def reported_departures(planes: int) -> dict[str, object]:
    """What a driver whose NIC reports when each DATA packet left its port sets: mrc-sim's
    ports (``sim.network``) and the agent's pacer (``agent.peers``). The loss timers and RTT
    run from the departures (``nic_departures``), and the core hands over at most
    ``NIC_BACKLOG_PER_PLANE`` packets per plane of the ``planes`` it sends on
    (``nic_backlog``). The defaults (both off) are a NIC that reports nothing."""
    return {"nic_departures": True, "nic_backlog": NIC_BACKLOG_PER_PLANE * planes}


@dataclass(frozen=True, slots=True)
class TransportConfig:
    """Everything a queue pair's sender, receiver and EV set need to know."""

    mode: Mode = Mode.MRC
    mtu: int = 4096  # payload bytes per DATA packet
    max_evs: int = DEFAULT_MAX_EVS  # EVs drawn per connection, split equally across planes (any path count)
    backup_evs_per_plane: int = 4  # spare EVs per plane that replace retired ones
    control_evs_per_plane: int = 4  # reverse EVs per plane that carry SACKs/NACKs (each probed)
    ev_profile: EvProfile = field(default_factory=EvProfile)  # which EV values may be drawn
    ev_min_active: int = 0  # OCP: loss retires no EV below this many usable; 0 = 3/4 of the drawn EVs
    skip_rotations: int = 4  # an ECN echo / trim NACK skips the EV this many turns (times its heat)
    max_skip_rotations: int = 32  # cap of the above
    # both count turns of a rotation of this many EVs; a set of n EVs sits out penalty_evs / n
    # times as many (a turn passes about n packets of the connection, so the penalty lasts
    # as many packets, about as long at the same rate, with 16 EVs as with 128)
    penalty_evs: int = DEFAULT_MAX_EVS
    penalty_halflife_ns: int = 16_000  # the heat of repeated ECN/trim penalties halves this often
    # a mark makes its path sit out only once the path's heat reaches this (1.5: a second
    # mark within a half-life; 0: every mark); a first mark on a cool path only heats it. A
    # connection whose NIC port serves 30 others turns its rotation ~31x slower in wall time,
    # so skipping on the first mark kept a path out for many RTTs while its queue drained in
    # one: an all-to-all's hosts left a T0 uplink together and herded onto the other three
    # (4x htsim's trims). ECMP mode: every mark skips (there an EV is one path of many)
    skip_heat: float = 1.5
    # a path sitting out for marks is GOOD again once a packet sent on it after the marked one
    # is delivered unmarked: its queue drained (``EvHeat.unmarked_echo``); off: turns or time
    drained_ends_penalty: bool = True
    # a loss guess on an EV at least this hot (its path was marked or trimmed within about a
    # half-life) is taken for a queue, not a failure: the EV sits out, no retirement; 0 = never
    hot_path_heat: float = 0.5
    flap_window_ns: int = 400_000  # an EV failing this soon after a restore is flapping ...
    max_flap_backoff: int = 6  # ... and waits 2**flaps probe intervals (capped) before probing
    plane_guard_min_ns: int = 0  # a plane is declared failed no sooner than this after its oldest packet
    sack_gap_threshold: int = 3  # a PSN is lost once this many packets sent after it are SACKed
    # this many packets in flight or fewer, with more to send, is a thin window: judged as a tail
    # (RACK, the tail probe), the gap rule cannot see a loss there (``LossBlame.sending``); 0: off
    thin_window: int = 3
    reorder_window_ns: int = 1_000  # ... and one of them left this long after it
    # MRC: a packet overtaken by ``sack_gap_threshold`` later packets of its own path (plane and
    # T1, one FIFO) is lost without the time guard, until a reordering is proven (recovery.py)
    path_order_losses: bool = True
    # line rate of each NIC port (one per plane), Gb/s; 0: unknown. With it the loss rules time
    # a packet from when it leaves its port, not from when the core hands it over: a window
    # handed over at once leaves over a window's serialisation, and the last of it would
    # otherwise look overtaken by packets that in truth left just after it
    port_gbps: float = 0.0
    # the NIC reports when each DATA packet left its port (``Endpoint.departed``; mrc-sim's
    # does, and the agent's pacer: ``reported_departures``): the RTT estimate and the loss
    # timers run from then, not from the hand-over, so a wait behind the NIC's other queue
    # pairs inflates neither the RTO nor the reorder window
    nic_departures: bool = False
    # with ``nic_departures``: DATA packets a queue pair may have waiting at its NIC (handed
    # over, not yet left), all planes together; 0: no bound. A NIC builds a packet when its
    # queue pair's turn comes, so a deeper backlog is the sans-I/O hand-over's artefact: its
    # packets carry EVs chosen long before they leave (onto a path retired since) and wait
    # behind the window of every other queue pair of the host
    nic_backlog: int = 0
    # with ``nic_departures``: planes in proportion to their NIC port's rate, as the NIC says it
    # with each departure. A port slower than the fastest by ``nic_clock.SLOW_PORT`` takes bytes
    # in flight in proportion to its rate, holds at most its part of ``nic_backlog`` (counted
    # whole, it held the whole backlog and the fast ports were fed one packet at a time), and
    # near the tail no packet that would arrive after the fast ports' last; a plane with no RTT
    # sample of its own is timed by when its packets were acknowledged. A fast plane then
    # carries more, and one dead before a connection's first answer loses more (docs/transport.md,
    # *Planes of unequal rate*)
    weigh_ports: bool = True
    # each plane's share of bytes in flight held down while its queue stands above that of the
    # least queued plane at full port rate (``plane_queues.py``): a plane slowed inside the
    # fabric, which no port rate shows, queued the difference several round trips deep (8
    # planes, one at 25 Gb/s inside: 0.64 of capacity). A queue every plane has moves nothing
    # (docs/transport.md, *Planes of unequal rate*)
    weigh_queues: bool = True
    rto_initial_ns: int = 40_000
    rto_min_ns: int = 16_000  # lower bound of the RTO computed from SRTT/RTTVAR
    rto_max_ns: int = 4_000_000
    retry_cnt: int = 7  # OCP/RoCE retry count: this many RTOs in a row without progress fail the QP
    local_ack_timeout: int = 0  # RoCE timer 4.096 us x 2**this, fixed (0: RTO from SRTT/RTTVAR)
    probe_interval_ns: int = 40_000  # liveness tick of GOOD EVs; a flapping EV waits 2**flaps of these
    # how often a retired path is probed (at least twice the slowest probe round trip): a
    # cleared fault is back in the rotation within this + K round trips
    retired_probe_interval_ns: int = 12_000
    probe_successes_to_restore: int = 3  # K consecutive probe replies bring an EV back
    # MRC: at the tail (nothing new to send, the window has room) a resend goes out twice, on
    # two planes: a resend lost again there costs the whole message a round trip
    twin_tail_resends: bool = True
    # a plane a connection has no round trip of yet is timed as much slower than the others as
    # the NIC's other connections found it (``plane_delays.py``; the caller shares the table):
    # off, a new connection's first packets on a slow plane were resent, or the plane
    # flushed, before they could arrive
    share_plane_delays: bool = True
    ack_every: int = 2  # coalesce: one SACK per this many in-order DATA packets ...
    ack_delay_ns: int = 2_000  # ... or after this delay, whichever comes first
    # a sender with fewer packets than this in flight asks for the SACK of every burst's last
    # packet (BTH AckReq), one packet bursts included: a small window's delay samples then come
    # per packet (two flows of 4 and 8 us RTT into one host: Jain 0.98 coalesced, 0.9995 so);
    # a wider window leaves its lone packets to coalescing (a SACK per packet costs both ends)
    ack_each_below: int = 32
    rx_window: int = 1 << 14  # PSNs beyond the cumulative ACK the receiver accepts
    initial_psn: int = 0
    cc: CcParams = field(default_factory=CcParams)  # parameters of cc_algorithm "window"
    cc_algorithm: str = "nscc"  # a name in mrc_host.core.cc_base.REGISTRY: nscc, nscc+rccc, ...
    nscc: NsccParams = field(default_factory=NsccParams)
    rccc: RcccParams = field(default_factory=RcccParams)  # receiver credits ("nscc+rccc", "rccc")
    # a researcher's switches, off by default (``Experimental``)
    experimental: Experimental = field(default_factory=Experimental)

    def __post_init__(self) -> None:
        if not 0 <= self.initial_psn <= PSN_MASK:
            raise ValueError(f"initial_psn {self.initial_psn} is not a 24-bit PSN")
        if not 0 <= self.local_ack_timeout <= 31 or self.retry_cnt < 0:
            raise ValueError("local_ack_timeout must be 0..31 and retry_cnt >= 0")
        if not 1 <= self.max_evs <= MAX_PROFILE_EVS:
            raise ValueError(f"max_evs: 1..{MAX_PROFILE_EVS} (OCP's largest EV profile), got {self.max_evs}")
        if self.backup_evs_per_plane < 0:
            raise ValueError(f"backup_evs_per_plane: at least 0, got {self.backup_evs_per_plane}")
        if not 0 <= self.ev_min_active <= self.max_evs:
            raise ValueError(
                f"ev_min_active: 0..max_evs ({self.max_evs}; OCP: at most ev_count), got {self.ev_min_active}"
            )

    @property
    def go_back_n(self) -> bool:
        return self.mode is Mode.SINGLE_PATH

    @property
    def retires_paths(self) -> bool:
        return self.mode is Mode.MRC

    @classmethod
    def for_rtt(cls, base_rtt_ns: int, bdp_bytes: int, **overrides: object) -> TransportConfig:
        """Timers and window scaled to one fabric: RTO >= 4 RTT, probes every 10 RTT, ...;
        ``overrides`` by field name, the experimental switches by their own (``Experimental``)."""
        overrides, switches = split_experimental(overrides)
        if switches:
            given = overrides.get("experimental")
            section = given if isinstance(given, Experimental) else Experimental()
            overrides["experimental"] = replace(section, **switches)  # type: ignore[arg-type]
        mtu = int(overrides.pop("mtu", 4096))  # type: ignore[call-overload]
        # NSCC's increments are sized for the fabric (its longest base RTT at the NIC's rate),
        # the same for every flow on it: by default this flow's own RTT and BDP
        network_bdp = int(overrides.pop("network_bdp", bdp_bytes))  # type: ignore[call-overload]
        network_rtt = int(overrides.pop("network_rtt", base_rtt_ns))  # type: ignore[call-overload]
        cc = CcParams(
            base_rtt_ns=base_rtt_ns,
            target_delay_ns=max(base_rtt_ns // 2, 1),
            max_cwnd_bytes=max(int(bdp_bytes * 1.25), 2 * mtu),
            min_cwnd_bytes=mtu,
            fair_increase_bytes=mtu,
        )
        nscc = NsccParams(
            base_rtt=base_rtt_ns,
            target_delay=max(base_rtt_ns // 2, 1),  # htsim: 0.75 RTT, which slows incasts here
            # the fabric's target (its longest RTT's), as UET's target delay is fabric-wide
            eta=uet_eta(mtu, network_bdp, max(network_rtt // 2, 1)),
            fi=uet_fi(mtu, network_bdp),
            # a calm fabric keeps one BDP plus two packets in flight (more only builds a
            # standing NIC queue, lost with any path that dies under it); the cap grows with
            # the RTT's spread up to 3 BDP, so a jittery fabric still fills its pipe
            bdp=bdp_bytes,
            lasthop_delay=network_rtt,
            max_cwnd=3 * bdp_bytes + 2 * mtu,
            min_cwnd=mtu,
            adjust_bytes_threshold=max(mtu, bdp_bytes // 8),
            adjust_period_threshold=base_rtt_ns,
            network_rtt=network_rtt,
        )
        # single path behaves like RoCE: a fixed local ACK timeout, the smallest one of at
        # least 64 base RTTs (a RoCE NIC's timer knows nothing of the RTT)
        roce_timeout = 1
        while 4096 << roce_timeout < 64 * base_rtt_ns:
            roce_timeout += 1
        base = cls(
            mtu=mtu,
            nscc=nscc,
            local_ack_timeout=roce_timeout if overrides.get("mode") is Mode.SINGLE_PATH else 0,
            rto_initial_ns=10 * base_rtt_ns,
            rto_min_ns=4 * base_rtt_ns,
            rto_max_ns=1000 * base_rtt_ns,
            probe_interval_ns=10 * base_rtt_ns,
            retired_probe_interval_ns=3 * base_rtt_ns,
            ack_delay_ns=max(base_rtt_ns // 2, 1),
            reorder_window_ns=max(base_rtt_ns // 4, 1),
            plane_guard_min_ns=base_rtt_ns,
            penalty_halflife_ns=4 * base_rtt_ns,
            flap_window_ns=100 * base_rtt_ns,
            cc=cc,
        )
        return replace(base, **overrides)  # type: ignore[arg-type]
