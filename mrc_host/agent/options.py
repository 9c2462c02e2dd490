"""What ``mrc serve`` is told (``AgentOptions``), its defaults, and the transport settings
every connection's core gets from them.

docs/agent.md ("Timers and window") says why the defaults are what they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from mrc_host.core import Mode, TransportConfig
from mrc_host.ev_profile import AgentEvProfile

DEFAULT_BASE_RTT_US: Final = 10_000  # Python agents on a shared CPU: see docs/agent.md, 'Timers'
DEFAULT_WINDOW: Final = 0  # 0: DEFAULT_WINDOW_PACKETS payloads (see transport_config)
DEFAULT_WINDOW_PACKETS: Final = 64  # CC maximum in payloads: see docs/agent.md, "Timers and window"
DEFAULT_PSN_WINDOW: Final = 1 << 14  # PSNs a sender may have past its oldest unacknowledged one
DEFAULT_ACK_EVERY: Final = 8  # one SACK per this many in-order DATA packets (or the ACK delay)
INITIAL_RTO_NS: Final = 200_000_000
DEFAULT_CONNECT_TIMEOUT_S: Final = 5.0  # a handshake unanswered this long: the peer is reported dead
DEFAULT_PEER_TIMEOUT_S: Final = 10.0  # a connection with data out and nothing acknowledged this long: dead
DEFAULT_DEADLINE_S: Final = 600.0  # a transfer not finished by then ends with an error
# after a frame, poll the ports without sleeping this long (a sleeping receiver costs each
# frame sent to it a wake-up); off by default: it measured no faster (docs/agent.md, "Limits")
DEFAULT_BUSY_POLL_US: Final = 0
DEFAULT_CONTROL_MODE: Final = 0o600  # the control socket: the agent's user only, unless a group is named


@dataclass
class AgentOptions:
    config: Path
    control: Path
    mtu: int | None = None  # DATA payload bytes; default: 4096, or the largest the NIC MTU allows
    base_rtt_us: int = DEFAULT_BASE_RTT_US
    window_bytes: int = DEFAULT_WINDOW
    psn_window: int = DEFAULT_PSN_WINDOW
    ack_every: int = DEFAULT_ACK_EVERY
    kernel_rules: bool = True
    seed: int | None = None
    verify_icrc: bool = True
    busy_poll_us: int = DEFAULT_BUSY_POLL_US
    ring: str = "v2"  # packet rings on the ports: "v2", "v3" or "off" (mrc_host/agent/rings.py)
    # the host link's rate, Mbit/s: the agent paces its DATA at it and reports departures to
    # the cores (pacer.py); 0: no pacer, a frame departs when it is handed over
    nic_rate_mbit: float = 0.0
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    peer_timeout_s: float = DEFAULT_PEER_TIMEOUT_S
    deadline_s: float = DEFAULT_DEADLINE_S
    control_group: str | None = None  # the control socket's group (mode 0660); None: 0600
    # which EVs connections draw and deny, and the CC (mrc_host/ev_profile.py)
    ev_profile: AgentEvProfile = field(default_factory=AgentEvProfile)

    def check(self) -> None:
        """ValueError naming the option for a value out of range."""
        if not 0 <= self.busy_poll_us <= 100_000:
            raise ValueError(f"--busy-poll-us: {self.busy_poll_us} is outside 0..100000")
        if self.ring not in ("v2", "v3", "off"):
            raise ValueError(f"--ring: {self.ring!r} is not v2, v3 or off")
        if not 0 <= self.nic_rate_mbit <= 100_000:
            raise ValueError(f"--nic-rate: {self.nic_rate_mbit:g} is outside 0..100000 Mbit/s")
        if not 1 <= self.ack_every <= 64:
            raise ValueError(f"--ack-every: {self.ack_every} is outside 1..64")
        if not 2 <= self.psn_window < 1 << 23:
            raise ValueError(f"--psn-window: {self.psn_window} is outside 2..{(1 << 23) - 1}")
        limits = {"--connect-timeout": self.connect_timeout_s, "--peer-timeout": self.peer_timeout_s,
                  "--deadline": self.deadline_s}  # fmt: skip
        for name, value in limits.items():
            if not 0 < value <= 86_400 * 7:
                raise ValueError(f"{name}: {value} is outside (0, 604800] s")

    def transport(self, mode: Mode, initial_psn: int, mtu: int) -> TransportConfig:
        """Timers from the base RTT; the window from the congestion control, bounded by
        ``window_bytes`` (the CC's maximum) and ``psn_window`` (PSNs past the oldest
        unacknowledged one). No fixed packet cap: the receiver's SACK always reports the
        packet that triggered it, so a span wider than the 64-bit bitmap is safe."""
        rtt = self.base_rtt_us * 1000
        # the first RTO waits longer than the derived 10 RTT: before any RTT sample, a burst of a
        # whole window through a Python receiver can take that long, and a spurious first RTO
        # would retire a healthy path
        window = self.window_bytes or DEFAULT_WINDOW_PACKETS * mtu
        return TransportConfig.for_rtt(
            rtt,
            int(window / 1.25),
            mode=mode,
            mtu=mtu,
            rto_initial_ns=max(10 * rtt, INITIAL_RTO_NS),
            # a whole plane is declared dead only after 2 base RTTs of silence: one plane's
            # frames can wait several ms behind the other's in a busy Python receiver or behind
            # neighbour discovery on a path's first packets (the core's default is 1 base RTT)
            plane_guard_min_ns=2 * rtt,
            # software switches and kernels (BMv2, veths) promise no order between a path's EVs
            # (their UDP source ports differ): the gap rule keeps its time guard on every path
            path_order_losses=False,
            rx_window=self.psn_window,
            initial_psn=initial_psn,
            ack_every=self.ack_every,
            **self.ev_profile.transport_overrides(),
        )
