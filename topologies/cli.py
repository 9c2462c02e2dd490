"""The Mininet CLI with MRC verbs: transfers, faults, paths, EV states, counters, captures.

Every verb is a method of :class:`MrcCommands` (plain Python, testable without a
terminal); :class:`MrcCLI` is Mininet's CLI with one ``do_<verb>`` per command whose
docstring is its ``help <verb>`` text. Faults go through the controller's northbound
API (the same calls ``mrcctl`` makes); transfers and EV states through the host agents.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from collections.abc import Callable
from typing import Any

import grpc
from mininet.cli import CLI
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from controller.cli import health_tables, path_row
from controller.fault_cli import add_fault_arguments, faults_table, inject
from mrc_host.agent.ev_summary import STATE_COLOURS, path_table
from topologies import cli_switches
from topologies.mn_commands import REFUSED, iperf

SIZE_UNITS = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30}
MODES = ("mrc", "single-path", "ecmp")


class CommandError(Exception):
    """A verb's arguments were wrong; the message says which and how."""


def parse_size(text: str) -> int:
    """``64M`` → 64 MiB, ``8MiB``, ``500k`` → 500 KiB, ``4096``; binary units as ``mrc send`` has them.

    ``K``/``M``/``G`` are read as binary (KiB/MiB/GiB), like most transfer tools.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)(i?)[bB]?\s*", text)
    if not m:
        raise CommandError(f"size: {text!r} is not a size (e.g. 64M, 8MiB, 4096)")
    number, unit, _ = m.groups()
    factor = SIZE_UNITS[(unit.lower() + "i") if unit else ""]
    size = int(float(number) * factor)
    if size <= 0:
        raise CommandError(f"size: {text!r} must be > 0")
    return size


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise CommandError(f"{self.prog}: {message}\nusage: {self.format_usage().strip()[7:]}")


def _parser(prog: str, description: str) -> _Parser:
    return _Parser(prog=prog, description=description, add_help=False)


class MrcCommands:
    """The verbs, bound to a running :class:`topologies.testbed.Testbed`."""

    def __init__(self, testbed: Any, console: Console | None = None, view: Any = None) -> None:
        self.testbed = testbed
        self.view = view  # the web view (mrc_view.server.ViewServer) once `view` started it
        self._own_view = False
        # piped output (scripts, logs) gets wide tables instead of rich's 80-column default
        self.out = console or (Console() if sys.stdout.isatty() else Console(width=200))

    # -- helpers ----------------------------------------------------------------------------------
    def _host(self, name: str) -> str:
        hosts = self.testbed.host_names()
        if name not in hosts:
            raise CommandError(f"no host {name!r}; hosts: {' '.join(hosts)}")
        return name

    def _controller(self) -> Any:
        if self.testbed.controller is None:
            raise CommandError("no controller in this run")
        return self.testbed.controller

    # -- mrc -----------------------------------------------------------------------------------------
    def mrc(self, line: str) -> dict[str, Any]:
        p = _parser("mrc", "transfer SIZE bytes from SRC's agent to DST")
        p.add_argument("src")
        p.add_argument("dst")
        p.add_argument("size")
        p.add_argument("--mode", choices=MODES, default="mrc")
        a = p.parse_args(shlex.split(line))
        src, dst, size = self._host(a.src), self._host(a.dst), parse_size(a.size)
        if src == dst:
            raise CommandError("mrc: source and destination are the same host")
        agent = self.testbed.agent(src)
        columns = (
            TextColumn(f"{src} → {dst} [{a.mode}]"),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TimeElapsedColumn(),
        )
        started = time.monotonic()
        with Progress(*columns, console=self.out, transient=False) as bar:
            task = bar.add_task("transfer", total=size)

            def on_progress(update: dict[str, Any]) -> None:  # the agent's progress line
                bar.update(task, completed=min(int(update.get("bytes_acked", 0)), size))

            result: dict[str, Any] = agent.client.send(dst, size, mode=a.mode, on_progress=on_progress)
            if result.get("ok"):
                bar.update(task, completed=size)
        wall = time.monotonic() - started
        self.out.print(self._summary_table(src, dst, size, a.mode, result, wall))
        return result

    @staticmethod
    def _summary_table(src: str, dst: str, size: int, mode: str, r: dict[str, Any], wall: float) -> Table:
        """The agent's transfer summary (mrc_host.agent's ``send`` reply), the lines that matter."""
        t = Table("", "value", title=f"{src} → {dst}, {size:,} bytes, mode {mode}")
        ok = r.get("ok")
        t.add_row("completed", "[green]yes[/green]" if ok else f"[red]no[/red] {r.get('error', '')}")
        rows = (
            ("bytes acknowledged", "bytes_acked", "{:,}"),
            ("verified by the receiver", "verified", "{}"),
            ("time (s)", "seconds", "{:.3f}"),
            ("goodput (Mbit/s)", "goodput_mbit_s", "{:.1f}"),
            ("data packets sent", "data_packets_sent", "{:,}"),
            ("retransmissions", "retransmissions", "{:,}"),
            ("EVs retired", "evs_retired", "{}"),
            ("EVs restored", "evs_restored", "{}"),
            ("losses (gap / timeout)", None, ""),
        )
        for label, key, fmt in rows:
            if key is None:
                if "losses_gap" in r:
                    t.add_row(label, f"{r['losses_gap']} / {r.get('losses_rto', 0)}")
            elif r.get(key) is not None:
                t.add_row(label, fmt.format(r[key]))
        if r.get("seconds") is None:
            t.add_row("wall time (s)", f"{wall:.3f}")
        return t

    # -- faults ------------------------------------------------------------------------------------
    def fault(self, line: str) -> Any:
        p = _parser("fault", "inject a fault through the controller")
        add_fault_arguments(p)
        f = inject(self._controller(), p.parse_args(shlex.split(line)))
        self.out.print(faults_table([f], f"fault {f.id} injected"))
        return f

    def clear(self, line: str) -> list[str]:
        args = shlex.split(line)
        if len(args) > 1:
            raise CommandError("usage: clear [fault id]   (no id: every fault)")
        cleared: list[str] = self._controller().clear(args[0] if args else None)
        self.out.print(f"cleared: {', '.join(cleared) or 'nothing'}")
        return cleared

    def faults(self, line: str = "") -> list[Any]:
        if line.strip():
            raise CommandError("usage: faults")
        faults: list[Any] = self._controller().faults()
        self.out.print(faults_table(faults, "active faults"))
        return faults

    # -- paths, EVs, counters -----------------------------------------------------------------------
    def paths(self, line: str) -> list[Any]:
        p = _parser("paths", "the paths from SRC to DST with the EVs SRC's agent uses on each")
        p.add_argument("src")
        p.add_argument("dst")
        p.add_argument("--all", action="store_true", help="one row per EV instead of one per path")
        a = p.parse_args(shlex.split(line))
        src, dst = self._host(a.src), self._host(a.dst)
        paths: list[Any] = self._controller().paths(src, dst)
        evs = agent_path_evs(self._agent_rows(src), dst)
        t = Table("plane", "t1", "EVs (agent)", "carrier", "hops", "status", title=f"paths {src} → {dst}")
        for path in paths:
            hops = " → ".join(h.node for h in path.hops)
            _ev, plane, t1, carrier, _hops, status = path_row(path, hops)
            mine = evs.get((path.plane, path.t1), [])
            if a.all and mine:
                for ev, state in mine:
                    t.add_row(plane, t1, f"{ev} {_state_markup(state)}", carrier, hops, status)
            else:
                t.add_row(plane, t1, ev_cell(mine), carrier, hops, status)
        t.caption = (
            f"EVs of {src}'s agent's mrc connection to {dst}, by state; --all: one row per EV"
            if evs
            else f"no mrc connection from {src} to {dst} yet: its agent draws the EVs when a transfer "
            f"starts (mrc {src} {dst} 1M); the switches see only the plane and the T1"
        )
        self.out.print(t)
        return paths

    def _agent_rows(self, host: str) -> list[dict[str, Any]]:
        """The host agent's EV rows, or none when it has no agent (the walk is shown anyway)."""
        try:
            evs = self.testbed.agent(host).client.evs()
        except (KeyError, OSError):
            return []
        return list(evs.get("evs", []) if isinstance(evs, dict) else evs or [])

    def health(self, line: str = "") -> Any:
        """Switch sessions and host agents as the controller sees them."""
        if line.strip():
            raise CommandError("usage: health")
        resp = self._controller().health()
        self.out.print(health_tables(resp))
        return resp

    def fidelity(self, line: str = "") -> Any:
        """Has this machine kept up with the run so far (topologies.fidelity)?"""
        from topologies.fidelity.report import summary_lines

        if line.strip():
            raise CommandError("usage: fidelity")
        if getattr(self.testbed, "fidelity", None) is None:
            raise CommandError("no fidelity monitor in this run")
        verdict = self.testbed.fidelity.verdict().as_dict()
        for text in summary_lines(verdict):
            self.out.print(text, highlight=False, markup=False)
        return verdict

    def evs(self, line: str) -> Any:
        p = _parser("evs", "EV states of a host's agent")
        p.add_argument("host")
        p.add_argument("--all", action="store_true", help="one row per EV instead of one per path")
        a = p.parse_args(shlex.split(line))
        host = self._host(a.host)
        evs = self.testbed.agent(host).client.evs()
        self.out.print(evs_table(host, evs) if a.all else path_table(evs, f"EVs of {host}"))
        return evs

    def counters(self, line: str) -> list[Any]:
        p = _parser("counters", "switch counters")
        p.add_argument("switches", nargs="*")
        p.add_argument("--all", action="store_true", help="also the cells that read zero")
        a = p.parse_args(shlex.split(line))
        topo = self.testbed.topology
        for s in a.switches:
            if not topo.has_switch(s):
                raise CommandError(f"no switch {s!r}; switches: {' '.join(x.name for x in topo.switches)}")
        cells: list[Any]
        cells, errors = self._controller().counters(a.switches or None)
        t = Table("switch", "counter", "index", "label", "packets", "bytes", title="counters")
        for c in cells:
            if a.all or c.packets:
                t.add_row(c.switch, c.counter, str(c.index), c.label, f"{c.packets:,}", f"{c.bytes:,}")
        if errors:
            t.caption = "errors: " + "; ".join(errors)
        self.out.print(t)
        return cells

    def view_(self, line: str) -> Any:
        """Start the web view of this run (once), print its URL; ``view stop`` stops it."""
        args = shlex.split(line)
        if args not in ([], ["stop"]):
            raise CommandError("usage: view [stop]")
        if args == ["stop"]:
            if self.view is None:
                raise CommandError("view: not running")
            self.close()
            self.out.print("web view stopped")
            return None
        if self.view is None:
            from mrc_view.cli import start_live

            self.view, self._own_view = start_live(self.testbed.run.path), True
        self.out.print(f"web view: {self.view.url}", highlight=False, soft_wrap=True)
        return self.view

    def close(self) -> None:
        """Stop the web view if this CLI started it."""
        if self.view is not None and self._own_view:
            self.view.stop()
        if self._own_view:
            self.view, self._own_view = None, False

    def capture(self, line: str) -> Any:
        p = _parser("capture", "tcpdump on one end of a link into the run's captures/")
        p.add_argument("link")
        p.add_argument("seconds", nargs="?", default="10")
        p.add_argument("--max-mb", type=float, default=None)
        a = p.parse_args(shlex.split(line))
        try:
            seconds = float(a.seconds)
        except ValueError:
            raise CommandError(f"seconds: {a.seconds!r} is not a number") from None
        try:
            cap = self.testbed.capture(a.link, seconds, a.max_mb)
        except KeyError as exc:
            raise CommandError(str(exc.args[0] if exc.args else exc)) from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        cap_mb = cap.budget.limit / (1 << 20)
        self.out.print(f"capturing {cap.ifname} for {seconds:g}s (at most {cap_mb:g} MB) into {cap.path}")
        if not cap.listening:
            self.out.print(f"tcpdump on {cap.ifname} not listening yet (or gone): frames until then are lost")
        return cap


def agent_path_evs(rows: list[dict[str, Any]], dst: str) -> dict[tuple[int, int], list[tuple[str, str]]]:
    """(plane, T1) -> [(EV, state)] of the agent's mrc send connection to ``dst``."""
    out: dict[tuple[int, int], list[tuple[str, str]]] = {}
    for r in rows:
        if r.get("peer") == dst and r.get("conn") == "send" and r.get("mode") == "mrc":
            out.setdefault((int(r["plane"]), int(r["t1"])), []).append((str(r["ev"]), str(r["state"])))
    return out


def _state_markup(state: str) -> str:
    colour = STATE_COLOURS.get(state, "white")
    return f"[{colour}]{state}[/{colour}]"


def ev_cell(evs: list[tuple[str, str]], shown: int = 3) -> str:
    """``32: 0a3f2c11 0a3f1d22 0a3f0e33 … (30 GOOD, 2 ASSUMED_BAD)`` for one path."""
    if not evs:
        return "-"
    counts: dict[str, int] = {}
    for _ev, state in evs:
        counts[state] = counts.get(state, 0) + 1
    first = " ".join(ev for ev, _state in evs[:shown]) + (" …" if len(evs) > shown else "")
    states = ", ".join(f"{n} {_state_markup(st)}" for st, n in counts.items())
    return f"{len(evs)}: {first} ({states})"


EV_COLUMNS = (
    "peer",
    "conn",
    "mode",
    "ev",
    "plane",
    "t1",
    "state",
    "data_sent",
    "delivered",
    "lost",
    "ecn",
    "trims",
)


def evs_table(host: str, evs: Any) -> Table:
    """A table of an agent's EVs (``AgentClient.evs()`` rows), the columns that matter first."""
    rows = list(evs.get("evs", []) if isinstance(evs, dict) else evs or [])
    present = {k for r in rows for k in r}
    keys = [k for k in EV_COLUMNS if k in present] or sorted(present)
    t = Table(*keys, title=f"EVs of {host}")
    for r in rows:
        cells = []
        for k in keys:
            v = r.get(k, "")
            if k == "ev" and isinstance(v, int):
                v = f"{v:08x}"
            if k == "state" and v not in ("GOOD", "", None):
                v = f"[red]{v}[/red]" if v in ("ASSUMED_BAD", "DENIED") else f"[yellow]{v}[/yellow]"
            cells.append(str(v))
        t.add_row(*cells)
    return t


class MrcCLI(CLI):  # type: ignore[misc]  # Mininet is untyped
    """Mininet's CLI plus the MRC verbs (``help mrc``, ``help fault`` ...)."""

    prompt = "mrc> "

    def __init__(
        self,
        mininet: Any,
        *args: Any,
        testbed: Any = None,
        console: Console | None = None,
        view: Any = None,
        **kw: Any,
    ):
        self.commands = MrcCommands(testbed, console, view)
        try:
            super().__init__(mininet, *args, **kw)  # runs the command loop
        finally:
            self.commands.close()

    # -- Mininet's own commands (topologies.mn_commands) ------------------------------------------
    def onecmd(self, line: str) -> bool:
        """Any command, Mininet's or ours: an exception becomes a message, never the end of the
        CLI (and with it the fabric)."""
        try:
            return bool(super().onecmd(line))
        except Exception as exc:
            word = (line.split() or ["?"])[0]
            self.commands.out.print(
                f"[red]{word}: {type(exc).__name__}: {exc}[/red] (the fabric is still up)", highlight=False
            )
            for node in self.mn.values():  # a node command cut short must not block the next one
                if node.waiting:
                    node.sendInt()
                    node.waitOutput()
            return False

    def _refuse(self, command: str) -> None:
        self.commands.out.print(
            f"[red]{command}: cannot work here: {REFUSED[command]}[/red]", highlight=False
        )

    def do_dpctl(self, _line: str) -> None:
        """dpctl: OpenFlow's; cannot work on these P4 switches (says why)."""
        self._refuse("dpctl")

    def do_wait(self, _line: str) -> None:
        """wait: for an OpenFlow controller; there is none (says why)."""
        self._refuse("wait")

    def do_switch(self, _line: str) -> None:
        """switch NAME start|stop: refused (says why); use `fault switch_down NAME`."""
        self._refuse("switch")

    def _iperf_pair(self, names: list[str], usage: str) -> tuple[Any, Any] | None:
        if not names:
            return self.mn.hosts[0], self.mn.hosts[-1]
        missing = [n for n in names if n not in self.mn]
        if len(names) != 2 or missing:
            why = f"no node {missing[0]!r}" if missing else "two hosts or none"
            self.commands.out.print(f"[red]{why}; usage: {usage}[/red]", highlight=False)
            return None
        return self.mn[names[0]], self.mn[names[1]]

    def _record(self, host: Any) -> Callable[[int], None] | None:
        run = getattr(self.commands.testbed, "run", None)
        return None if run is None else lambda pid: run.record(pid, "iperf", host.name)

    def do_iperf(self, line: str) -> None:
        """iperf [SRC DST]: a 5 s TCP iperf from SRC to DST (default: the first and the last host),
        as Mininet's, over the fabric; prints [server rate, client rate]."""
        pair = self._iperf_pair(line.split(), "iperf [SRC DST]")
        if pair is not None:
            iperf(*pair, on_start=self._record(pair[1]))

    def do_iperfudp(self, line: str) -> None:
        """iperfudp BW SRC DST: a 5 s UDP iperf at BW (e.g. 10M), as Mininet's."""
        args = line.split()
        if len(args) != 3:
            self.commands.out.print("[red]usage: iperfudp BW SRC DST (BW e.g. 10M)[/red]", highlight=False)
            return
        pair = self._iperf_pair(args[1:], "iperfudp BW SRC DST")
        if pair is not None:
            iperf(*pair, l4="UDP", udp_bw=args[0], on_start=self._record(pair[1]))

    def run_verb(self, verb: Callable[[str], Any], line: str) -> None:
        """Run one MRC verb: a wrong argument or a failed call is a message, never the end of the CLI."""
        name = verb.__name__.rstrip("_")
        try:
            verb(line)
        except CommandError as exc:
            self.commands.out.print(f"[red]{exc}[/red]", highlight=False)
        except KeyError as exc:
            self.commands.out.print(f"[red]{exc.args[0] if exc.args else exc}[/red]", highlight=False)
        except grpc.RpcError as exc:
            self.commands.out.print(f"[red]controller: {exc.code().name}: {exc.details()}[/red]")
        except Exception as exc:  # a verb must never end the CLI (and the fabric with it)
            self.commands.out.print(f"[red]{name}: {type(exc).__name__}: {exc}[/red]")

    def do_mrc(self, line: str) -> None:
        """mrc SRC DST SIZE [--mode mrc|single-path|ecmp]
        Transfer SIZE bytes (64M, 8MiB, 4096 ...) from SRC's agent to DST's, with a live
        progress bar and a summary (bytes, time, goodput, retransmissions, EVs retired).
        Example: mrc h0 h3 64M"""
        self.run_verb(self.commands.mrc, line)

    def do_fault(self, line: str) -> None:
        """fault KIND TARGET [--direction both|a2b|b2a] [--prob P] [--period S] [--duration S]
        Inject a fault through the controller. KIND: link_down, blackhole, loss, flap,
        switch_down, nic_port_down. TARGET: a link a-b or node:port; a switch; a NIC port
        host:plane. --duration clears it by itself after S seconds.
        Examples: fault blackhole t0p0n0-t1p0n0     fault loss t1p1n1:2 --prob 0.2
                  fault switch_down t1p0n1           fault nic_port_down h3:0"""
        self.run_verb(self.commands.fault, line)

    def do_clear(self, line: str) -> None:
        """clear [ID]
        Clear fault ID (as listed by `faults`), or every fault when no ID is given."""
        self.run_verb(self.commands.clear, line)

    def do_faults(self, line: str) -> None:
        """faults
        List the active faults with the switch entries each one holds."""
        self.run_verb(self.commands.faults, line)

    def do_paths(self, line: str) -> None:
        """paths SRC DST [--all]
        Every path (plane, T1) from SRC to DST, walked through the installed tables and live
        faults: its hops, whether a packet gets through (ok / lossy / dropped where and why),
        and the EVs SRC's agent sends on it, by state; --all: one row per EV."""
        self.run_verb(self.commands.paths, line)

    def do_evs(self, line: str) -> None:
        """evs HOST [--all]
        The EVs of HOST's agent: one row per path (connection, plane, T1) with how many EVs
        are GOOD, SKIP, ASSUMED_BAD or DENIED and the path's packet counts; --all: one row
        per EV."""
        self.run_verb(self.commands.evs, line)

    def do_counters(self, line: str) -> None:
        """counters [SWITCH ...] [--all]
        Switch counters (port rx/tx, drops by reason, ECN marks) read over P4Runtime;
        cells that read zero are hidden unless --all."""
        self.run_verb(self.commands.counters, line)

    def do_health(self, line: str) -> None:
        """health
        Each switch's P4Runtime session (primary, backup or unreachable, with reconciles and
        pipeline pushes) and each host agent's control socket (alive, dead or absent)."""
        self.run_verb(self.commands.health, line)

    def do_fidelity(self, line: str) -> None:
        """fidelity
        Whether this machine kept up with the run so far: every switch, shim, agent and the
        controller had the CPU it needed, every link carried its rate when its queue held
        packets, nothing dropped outside the design; the reasons and figures if not."""
        self.run_verb(self.commands.fidelity, line)

    def do_capture(self, line: str) -> None:
        """capture LINK [SECONDS] [--max-mb N]
        tcpdump on one end of LINK (a-b: the lower end; node:port or an interface name:
        that end) for SECONDS (default 10) into <run_dir>/captures/ (opens in Wireshark),
        whole frames; it stops early at N MB (default 20)."""
        self.run_verb(self.commands.capture, line)

    def do_view(self, line: str) -> None:
        """view [stop]
        Serve the web view of this run (links by load, faults, every connection's EVs, the
        event feed; click a link or switch to inject a fault) on 127.0.0.1 and print its URL
        with the access token. `view stop` stops it; leaving the CLI stops it too."""
        self.run_verb(self.commands.view_, line)

    def mrc_verbs(self) -> list[str]:
        """The verbs this CLI adds to Mininet's: every ``do_<verb>`` Mininet's own CLI lacks."""
        return [name[3:] for name in self.get_names() if name.startswith("do_") and not hasattr(CLI, name)]

    do_switches = cli_switches.do_switches  # the switches to the usual P4 tools (cli_switches.py)
    do_p4 = cli_switches.do_p4
    do_p4rt = cli_switches.do_p4rt

    def do_help(self, line: str) -> None:
        super().do_help(line)
        if not line.strip():
            self.commands.out.print(f"MRC verbs: {', '.join(self.mrc_verbs())} (help <verb>)")
