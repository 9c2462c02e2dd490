"""The agent process: one selector loop that owns the clock and dispatches.

``Agent.run`` waits on the NIC ports (``ports.Ports``), the control socket and its clients
(``control.ControlServer``) and a wake-up socket for signals. Each turn it hands

1. control requests to the handler table (``commands.Commands``);
2. every frame, decoded (``codec.decode_frame``, ICRC checked; refusals counted by reason),
   to the connections (``peers.Peers``: the peer binding, the handshake, the core);
3. the time to the connections' timers, and every ``TICK_S`` to the handshakes
   (``Handshakes.tick``) and the transfers (``transfer.Transfers.tick``: deadlines, silent peers,
   progress lines).

SIGTERM/SIGINT end the loop; the nftables rules, the sockets and the control socket file
are removed on the way out.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import selectors
import signal
import socket
import time
from typing import Any, Final

from mrc_fabric.frames import DEFAULT_PAYLOAD
from mrc_fabric.hostconfig import HostConfig
from mrc_host.wire.codec import MalformedPacket, decode_frame
from mrc_host.wire.messages import Frame

from .commands import Commands
from .control import ControlServer
from .netio import KernelQuiet, interface_mtu
from .options import AgentOptions
from .pacer import NicPacer
from .paths import HostPaths, payload_mtu
from .peers import Peers, on_messages
from .ports import LoopCounters, Ports
from .transfer import Transfers

log = logging.getLogger("mrc.agent")

TICK_S: Final = 0.1  # handshakes, deadlines, liveness and progress lines are looked at this often


class Agent:
    def __init__(self, opts: AgentOptions) -> None:
        opts.check()
        self.opts = opts
        self.paths = HostPaths(HostConfig.load(opts.config))
        self.started = time.monotonic()
        self.verify_icrc = opts.verify_icrc
        self.deadline_s = opts.deadline_s
        self.mtu = self._choose_mtu(opts.mtu)
        self.counters = LoopCounters()
        self.ports = Ports([p.ifname for p in self.paths.ports], opts.ring)
        self.peers = Peers(self.paths, self.ports, opts, self.mtu, self.counters)
        self.peers.check_profile()
        self.commands = Commands(self)
        self.control = ControlServer(opts.control, self.commands.handle, self._count_internal_error,
                                     group=opts.control_group)  # fmt: skip
        self.transfers = Transfers(self.peers, self.control.reply, self.counters, opts.peer_timeout_s)
        self.control.on_drop = lambda c: self.transfers.client_gone(c, time.monotonic_ns())
        self.quiet = KernelQuiet(self.paths.nic_prefixes(), [p.ifname for p in self.paths.ports])
        self.sel = selectors.DefaultSelector()
        self._stop = False
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None

    # ---- set-up and tear-down ----------------------------------------------------------------
    def _choose_mtu(self, wanted: int | None) -> int:
        limit = min(payload_mtu(interface_mtu(p.ifname)) for p in self.paths.ports)
        if wanted is None:
            return min(DEFAULT_PAYLOAD, limit)
        if not 256 <= wanted <= limit:
            raise ValueError(f"--mtu: {wanted} B of payload does not fit the NIC MTU (256..{limit})")
        return wanted

    def open(self) -> None:
        """Sockets, kernel rules, control socket. On failure everything opened is closed again."""
        self.paths.warm_up()
        try:
            self.ports.open(self.sel)
            if self.opts.kernel_rules:
                self.quiet.install()
            self.control.open(self.sel)
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            self.sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        except BaseException:
            self.close()
            raise
        log.info(
            "agent %s up: ports %s, payload mtu %d, rules %s, control %s",
            self.paths.name,
            [p.ifname for p in self.paths.ports],
            self.mtu,
            self.quiet.prefixes if self.quiet.installed else "off",
            self.opts.control,
        )

    def close(self) -> None:
        self.control.close()
        self.ports.close()
        try:
            self.quiet.remove()
        except (RuntimeError, OSError) as exc:
            log.error("could not remove the nftables rules: %s", exc)
        for w in (self._wake_r, self._wake_w):
            if w is not None:
                w.close()
        self._wake_r = self._wake_w = None
        self.sel.close()

    def _count_internal_error(self) -> None:
        self.counters.internal_errors += 1

    def stop(self) -> None:
        """Ask the loop to end (safe from a signal handler or another thread)."""
        self._stop = True
        if self._wake_w is not None:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")

    def install_signal_handlers(self) -> None:
        def handler(signum: int, _frame: object) -> None:
            log.info("signal %d: shutting down", signum)
            self.stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    # ---- the loop ----------------------------------------------------------------------------
    def run(self) -> None:
        last_tick = 0
        spin_ns = self.opts.busy_poll_us * 1000
        spin_until = 0  # poll without sleeping until then: frames are arriving
        peers = self.peers
        pacer = peers.pacer
        while not self._stop:
            now = time.monotonic_ns()
            timeout = TICK_S
            due = peers.next_timer()
            if due is not None:
                timeout = min(timeout, max(0.0, (due - now) / 1e9))
            paced = pacer.next_due() if pacer is not None else None
            if paced is not None:  # a DATA frame waits for its port (pacer.py)
                timeout = min(timeout, max(0.0, (paced - now) / 1e9))
            if now < spin_until:
                timeout = 0.0
            ready_ports: list[int] = []
            self.ports.flush()  # what timers, ticks and requests queued goes out before a sleep
            for key, mask in self.sel.select(timeout):
                kind, arg = key.data
                if kind == "port":
                    if mask & selectors.EVENT_READ:
                        ready_ports.append(arg)
                    # (writable: a full ring's slots came free; the next turn's flush moves frames in)
                elif kind == "listen":
                    self.control.accept()
                elif kind == "client":
                    self.control.io(arg, mask)
                elif self._wake_r is not None:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
            if ready_ports:
                self.ports.read(ready_ports, self._on_batch)
                if spin_ns:
                    spin_until = time.monotonic_ns() + spin_ns
            now = time.monotonic_ns()
            if pacer is not None:
                self._pace(pacer, now)
            peers.fire_timers(now)
            if now - last_tick >= TICK_S * 1e9:
                last_tick = now
                self._tick(now)

    def _on_batch(self, frames: list[Any], planes: list[int]) -> None:
        """Frames read together: each decoded (ICRC checked; refusals counted), then all of
        them to the connections (``peers.on_messages``). A bug costs the frames of its batch."""
        msgs: list[Frame] = []
        verify = self.verify_icrc
        malformed = self.counters.malformed
        for frame in frames:
            try:
                msgs.append(decode_frame(frame, verify_icrc=verify, borrow=True))
            except MalformedPacket as exc:
                malformed[exc.reason] += 1
        if not msgs:
            return
        try:
            on_messages(self.peers, msgs, time.monotonic_ns())
        except Exception:
            self.counters.internal_errors += 1
            malformed["internal"] += 1
            log.exception("internal error on frames from %s",
                          ", ".join(sorted({self.ports.counters[p].ifname for p in planes})))  # fmt: skip

    def _pace(self, pacer: NicPacer, now: int) -> None:
        """The DATA frames whose port is free go (a bug costs the frames of this turn)."""
        try:
            pacer.run(now)
        except Exception:
            self.counters.internal_errors += 1
            log.exception("internal error in the pacer")

    def _tick(self, now: int) -> None:
        try:
            self.peers.handshakes.tick(now)
            self.transfers.tick(now)
        except Exception:
            self.counters.internal_errors += 1
            log.exception("internal error in the agent's tick")


def serve(opts: AgentOptions) -> None:
    """``mrc serve``: run until SIGTERM/SIGINT, then clean up."""
    agent = Agent(opts)
    agent.open()
    agent.install_signal_handlers()
    # everything made so far (scapy's and numpy's modules, the frame templates) lives as long
    # as the process: out of the collector's generations, a full collection no longer walks
    # those hundreds of thousands of objects (~28 ms, a pause in the packet loop)
    gc.freeze()
    try:
        agent.run()
    finally:
        agent.close()
        log.info("agent %s stopped", agent.paths.name)
