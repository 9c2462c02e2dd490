"""Two or more agents' connection and transfer logic wired together through real frames.

No sockets, no root: each ``Host`` is what ``Agent`` builds around its loop -- ``Peers`` (the
binding, the handshake, the cores) and ``Transfers`` -- with ports that collect frames
instead of sending them. ``Net`` carries every frame, encoded by the sender and decoded
(ICRC checked) by the receiver, to the host whose NIC address it is for, on a simulated
clock; a ``drop`` rule loses frames. The agent's own tick runs every ``TICK_NS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.compiler import compile_host_configs
from mrc_fabric.hostconfig import HostConfig
from mrc_fabric.topology import build_clos
from mrc_host.agent.options import AgentOptions
from mrc_host.agent.paths import HostPaths
from mrc_host.agent.peers import Peers, on_messages
from mrc_host.agent.ports import LoopCounters, Ports
from mrc_host.agent.transfer import Transfer, Transfers
from mrc_host.core import Mode
from mrc_host.wire.codec import MalformedPacket, decode_frame

TICK_NS = 100_000_000
MTU = 1364


@dataclass
class FakeClient:
    """Stands for a control client: what the agent replied to it."""

    replies: list[dict[str, Any]] = field(default_factory=list)
    closed: bool = False

    @property
    def final(self) -> dict[str, Any] | None:
        return next((r for r in self.replies if "ok" in r), None)


class _Wire:
    """Stands for one port's raw socket: what is sent on it goes to ``out``."""

    def __init__(self, plane: int, out: list[tuple[int, bytes]]) -> None:
        self.plane, self.out = plane, out

    def send(self, frame: bytes) -> int:
        self.out.append((self.plane, frame))
        return len(frame)

    def recv(self, n: int, flags: int = 0) -> bytes:
        raise BlockingIOError


def fake_ports(planes: int) -> tuple[Ports, list[tuple[int, bytes]]]:
    """Real ``Ports`` (the agent's compiled class) over sockets that only collect frames."""
    out: list[tuple[int, bytes]] = []
    ports = Ports([f"fake{p}" for p in range(planes)])
    for p in range(planes):
        ports.add(_Wire(p, out))  # type: ignore[arg-type]
    return ports, out


class Host:
    def __init__(self, paths: HostPaths, opts: AgentOptions) -> None:
        self.paths = paths
        self.ports, self.out = fake_ports(len(paths.ports))
        self.counters = LoopCounters()
        self.peers = Peers(paths, self.ports, opts, MTU, self.counters)
        self.transfers = Transfers(
            self.peers, lambda c, r: c.replies.append(r), self.counters, opts.peer_timeout_s
        )
        self.malformed: dict[str, int] = {}

    @property
    def name(self) -> str:
        return self.paths.name

    def send(self, peer: str, size: int, now: int, mode: Mode = Mode.MRC, deadline_s: float = 600.0,
             client: FakeClient | None = None) -> Transfer:  # fmt: skip
        return self.transfers.start(peer, mode, size, now, deadline_s, client or FakeClient())  # type: ignore[arg-type]

    def deliver(self, frame: bytes, now: int) -> None:
        try:
            msg = decode_frame(frame, verify_icrc=True)
        except MalformedPacket as exc:
            self.malformed[exc.reason] = self.malformed.get(exc.reason, 0) + 1
            return
        self.peers.on_message(msg, now)

    def deliver_many(self, frames: list[bytes], now: int) -> None:
        """Frames that arrived together, as the agent's loop hands a batch to its connections
        (``Agent._on_batch``: decoded one by one, then ``peers.on_messages``)."""
        msgs = []
        for frame in frames:
            try:
                msgs.append(decode_frame(frame, verify_icrc=True))
            except MalformedPacket as exc:
                self.malformed[exc.reason] = self.malformed.get(exc.reason, 0) + 1
        if msgs:
            on_messages(self.peers, msgs, now)


Drop = Callable[[str, str, bytes], bool]  # (from host, to host, frame) -> lost


class Net:
    def __init__(
        self,
        names: tuple[str, ...] = ("uch0", "uch3"),
        seed: int = 1,
        step_ns: int = 20_000,
        batch: int = 1,
        **opts: Any,
    ) -> None:
        self.step_ns = step_ns  # how long one round of frames takes on the simulated clock
        self.batch = batch  # frames a host takes together (1: one ``on_message`` per frame)
        cfgs: dict[str, HostConfig] = compile_host_configs(build_clos(2, 2, 2, 2, prefix="uc"))
        self.hosts: dict[str, Host] = {}
        for i, n in enumerate(names):
            o = AgentOptions(Path("/nonexistent.json"), Path("/nonexistent.sock"), seed=seed + i, **opts)
            self.hosts[n] = Host(HostPaths(cfgs[n]), o)
        self.by_address = {a: h for h in self.hosts.values() for a in (str(p.address) for p in h.paths.ports)}
        self.now = 1_000_000_000
        self.next_tick = self.now + TICK_NS
        self.drop: Drop = lambda src, dst, frame: False
        self.delivered = 0
        self.log: list[tuple[int, str, bytes]] = []  # (time, sender, frame) of every frame sent

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def _route(self, frame: bytes) -> Host | None:
        import ipaddress

        return self.by_address.get(str(ipaddress.IPv6Address(frame[78:94])))

    def step(self) -> bool:
        """Deliver every frame sent so far; False when there was none."""
        batch = [(h, f) for h in self.hosts.values() for _p, f in h.out]
        for h in self.hosts.values():
            h.out.clear()
        if not batch:
            return False
        sent = self.now  # the frames were sent in the round before this one
        self.now += self.step_ns
        arrived: dict[str, list[bytes]] = {}
        for src, frame in batch:
            self.log.append((sent, src.name, frame))
            dst = self._route(frame)
            if dst is None or self.drop(src.name, dst.name, frame):
                continue
            self.delivered += 1
            if self.batch == 1:
                dst.deliver(frame, self.now)
            else:
                arrived.setdefault(dst.name, []).append(frame)
        for name, frames in arrived.items():
            for k in range(0, len(frames), self.batch):
                self.hosts[name].deliver_many(frames[k : k + self.batch], self.now)
        self._due()
        return True

    def advance(self) -> None:
        """Nothing in flight: the clock jumps to the next timer or tick, which fires."""
        due = [t for h in self.hosts.values() if (t := h.peers.next_timer()) is not None]
        due += [
            t for h in self.hosts.values() if h.peers.pacer and (t := h.peers.pacer.next_due()) is not None
        ]
        self.now = max(self.now, min([*due, self.next_tick]))
        self._due()

    def _due(self) -> None:
        """What the agent's loop does after every turn: due timers, and the tick when it is time."""
        for h in self.hosts.values():
            if h.peers.pacer is not None:  # (DATA whose port is free: agent.py's ``_pace``)
                h.peers.pacer.run(self.now)
            h.peers.fire_timers(self.now)
        if self.now >= self.next_tick:
            self.next_tick = self.now + TICK_NS
            for h in self.hosts.values():
                h.peers.handshakes.tick(self.now)
                h.transfers.tick(self.now)

    def run(self, until: Callable[[], bool], limit: int = 500_000, max_s: float = 120.0) -> None:
        end = self.now + int(max_s * 1e9)
        for _ in range(limit):
            if until():
                return
            if self.now > end:
                break
            if not self.step():
                self.advance()
        raise AssertionError(f"did not happen within {limit} steps / {max_s} s of simulated time")
