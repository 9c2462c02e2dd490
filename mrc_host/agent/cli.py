"""``mrc``: run the host agent (``mrc serve``) and talk to it (send, cancel, stats, evs, deny, allow).

    mrc serve --config RUN/hosts/h0.json --control RUN/agents/h0.sock [--log FILE] [--mtu N]
    mrc send h3 64M [--mode mrc|single-path|ecmp] [--agent SOCK] [--json]
    mrc cancel 00c0ffee00c0ffee [--agent SOCK]
    mrc stats [--agent SOCK] [--json]
    mrc evs [--all] [--agent SOCK] [--json]
    mrc deny 10040001 / mrc allow 10040001
    mrc deny --field 1 --min 12 --max 15     # a rule: every EV it matches, now and on new connections
    mrc profile EVS.toml [--planes 2 --t1 4] [--all] [--json]   # check a profile, show its EVs

``--agent`` defaults to $MRC_AGENT. ``--json`` prints the agent's reply as JSON (for scripts).
Exit status: 0 on success, 1 when the agent refused or the transfer was not confirmed, 2 on
bad arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from mrc_host.core.config import DEFAULT_MAX_EVS

from .client import AgentClient, AgentError
from .ev_summary import STATE_COLOURS, path_table, retx_causes_text
from .protocol import RULE_KEYS, ProtocolError, parse_size

BUILTIN = ("serve", "send", "cancel", "stats", "evs", "deny", "allow", "profile")


def _agent_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agent", help="the agent's control socket (default: $MRC_AGENT)")
    p.add_argument("--json", action="store_true", help="print the reply as JSON")


def build_parser() -> argparse.ArgumentParser:
    more = ", ".join(f"mrc {name}" for name in sorted(plugin_commands()))
    ap = argparse.ArgumentParser(
        prog="mrc",
        description="MRC host agent and its control CLI",
        epilog=f"also: {more} (mrc <command> --help)" if more else None,
    )
    sub = ap.add_subparsers(dest="command", required=True)
    _add_serve(sub.add_parser("serve", help="run the agent in this host's network namespace"))
    _add_client_commands(sub)
    _add_profile(sub.add_parser("profile", help="check an EV-profile file and show the EVs it gives"))
    return ap


def _add_profile(p: argparse.ArgumentParser) -> None:
    """``mrc profile``: an EV-profile file checked offline, with one connection's EVs."""
    p.add_argument("file", type=Path, help="the TOML EV profile (as for mrc serve --ev-profile)")
    p.add_argument("--planes", type=int, default=2, help="planes of the fabric to draw for (default 2)")
    p.add_argument("--t1", type=int, default=4, help="T1 switches per plane (default 4)")
    p.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    p.add_argument("--evs", type=int, help="override the profile's EV count")
    p.add_argument("--ev-min-active", type=int, help="override the profile's min_active")
    p.add_argument("--all", action="store_true", help="one row per EV, with its fields")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _add_serve(s: argparse.ArgumentParser) -> None:
    """``mrc serve``: the agent's own options (timers, window, EV profile, CC)."""
    s.add_argument("--config", required=True, type=Path, help="<run_dir>/hosts/<host>.json")
    s.add_argument("--control", required=True, type=Path, help="path of the control unix socket")
    s.add_argument("--log", type=Path, help="log file (default: stderr)")
    s.add_argument("--mtu", type=int, help="DATA payload bytes per packet (default: what the NIC MTU fits)")
    s.add_argument("--base-rtt-us", type=int, default=10_000, help="base RTT all timers derive from")
    s.add_argument(
        "--window", default="0", help="congestion window cap in bytes (0: 64 payloads, 256 KiB at 4096 B)"
    )
    s.add_argument(
        "--psn-window",
        type=int,
        default=1 << 14,
        help="PSNs a sender may have past its oldest unacknowledged one (2..8388607)",
    )
    s.add_argument("--ack-every", type=int, default=None, help="one SACK per this many in-order DATA packets")
    s.add_argument("--no-icrc-check", action="store_true", help="do not verify the ICRC of received frames")
    s.add_argument(
        "--busy-poll-us",
        type=int,
        default=None,
        help="after a frame, poll the ports without sleeping for this long (0: always sleep in epoll)",
    )
    s.add_argument(
        "--ring",
        choices=("v2", "v3", "off"),
        default="v2",
        help="packet rings on the ports: TPACKET_V2 (default), TPACKET_V3 (block-wise: adds up to "
        "a kernel tick of delay to a burst's last frame), or off (a system call per frame)",
    )
    s.add_argument(
        "--nic-rate",
        type=float,
        default=0.0,
        help="the host link's rate in Mbit/s: DATA leaves each port at most at it and the cores hear "
        "when each frame left (the testbed passes its link rate); 0 (default): no pacing",
    )
    s.add_argument(
        "--connect-timeout",
        type=float,
        default=5.0,
        help="seconds to wait for a peer's handshake answer before reporting it dead",
    )
    s.add_argument(
        "--peer-timeout",
        type=float,
        default=10.0,
        help="seconds without any acknowledgement before a transfer's peer is reported dead "
        "(or 16 of the connection's RTOs, when longer)",
    )
    s.add_argument("--deadline", type=float, default=600.0, help="default transfer deadline in seconds")
    s.add_argument(
        "--control-group",
        help="group allowed to use the control socket (mode 0660; default: the agent's user only, 0600)",
    )
    s.add_argument("--no-kernel-rules", action="store_true", help="do not install the nftables drop rules")
    s.add_argument("--ev-profile", type=Path, help="TOML EV profile: EV count, values, DENIED rules, CC")
    s.add_argument(
        "--evs", type=int, help=f"EVs per connection, split over the planes (default {DEFAULT_MAX_EVS})"
    )
    s.add_argument("--backup-evs", type=int, help="spare EVs per plane that replace retired ones (default 4)")
    s.add_argument("--ev-min-active", type=int, help="loss retires no EV below this many (default 0: 3/4)")
    s.add_argument("--cc", help="congestion control: nscc (default), nscc+rccc, rccc, window or fixed")
    s.add_argument("--seed", type=int, help="seed of the EV draws and transfer ids (default: random)")
    s.add_argument("-v", "--verbose", action="store_true")


def _add_client_commands(sub: Any) -> None:
    """The commands that talk to a running agent over its control socket."""
    snd = sub.add_parser("send", help="send SIZE bytes to PEER and wait for the receiver's confirmation")
    snd.add_argument("peer")
    snd.add_argument("size", help="bytes: 4096, 64M, 8MiB, 10MB, 1G")
    snd.add_argument("--mode", default="mrc", choices=["mrc", "single-path", "ecmp"])
    snd.add_argument("--no-progress", action="store_true")
    snd.add_argument(
        "--deadline",
        type=float,
        default=0.0,
        help="seconds: end with an error (exit status 1) if not done by then (0: agent default)",
    )
    _agent_arg(snd)

    c = sub.add_parser("cancel", help="end a transfer now (its id as `mrc send` and `mrc stats` print it)")
    c.add_argument("transfer_id", help="16 hex digits")
    _agent_arg(c)

    for name, text in (("stats", "agent counters, EVs per path, transfers"), ("evs", "EV states per path")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--all", action="store_true", help="one row per EV instead of one per path")
        _agent_arg(p)
    for name in ("deny", "allow"):
        p = sub.add_parser(name, help=f"{name} an EV, or the EVs a rule matches, on every connection")
        p.add_argument("ev", nargs="?", help="EV as 8 hex digits, as `mrc evs` prints it")
        for key, text in (("plane", "plane"), ("t1", "T1"), ("field", "format field (0: first)"),
                          ("min", "the field's lowest value"), ("max", "the field's highest value"),
                          ("mask", "bits of the EV ..."), ("value", "... that must equal this")):  # fmt: skip
            p.add_argument(f"--{key}", type=lambda x: int(x, 0), help=f"rule: {text}")
        _agent_arg(p)


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


def cmd_serve(args: argparse.Namespace) -> int:
    # before numpy is first imported (by the codec, below): the agent only sums arrays, so
    # OpenBLAS's thread pool would idle, and a second thread alone costs every large malloc
    # and free a lock and every socket call a cancellation check (glibc in threaded mode)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from mrc_host import ev_profile

    from .agent import serve
    from .options import DEFAULT_ACK_EVERY, DEFAULT_BUSY_POLL_US, AgentOptions

    handler: logging.Handler = logging.FileHandler(args.log) if args.log else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    try:
        profile = ev_profile.load(args.ev_profile) if args.ev_profile else ev_profile.AgentEvProfile()
        overrides = {
            "evs": args.evs,
            "backups_per_plane": args.backup_evs,
            "min_active": args.ev_min_active,
            "cc": args.cc,
        }
        profile = ev_profile.parse(
            profile.as_dict() | {k: v for k, v in overrides.items() if v is not None}, "command line"
        )
    except ev_profile.ProfileError as exc:
        print(f"mrc-agent: {exc}", file=sys.stderr)
        return 2
    opts = AgentOptions(
        ev_profile=profile,
        config=args.config,
        control=args.control,
        mtu=args.mtu,
        base_rtt_us=args.base_rtt_us,
        window_bytes=parse_size(args.window),
        psn_window=args.psn_window,
        ack_every=DEFAULT_ACK_EVERY if args.ack_every is None else args.ack_every,
        kernel_rules=not args.no_kernel_rules,
        seed=args.seed,
        verify_icrc=not args.no_icrc_check,
        busy_poll_us=DEFAULT_BUSY_POLL_US if args.busy_poll_us is None else args.busy_poll_us,
        ring=args.ring,
        nic_rate_mbit=args.nic_rate,
        connect_timeout_s=args.connect_timeout,
        peer_timeout_s=args.peer_timeout,
        deadline_s=args.deadline,
        control_group=args.control_group,
    )
    try:
        serve(opts)
    except ev_profile.ProfileError as exc:  # the profile does not fit a destination's fabric
        print(f"mrc-agent: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_send(args: argparse.Namespace, client: AgentClient) -> int:
    size = parse_size(args.size)
    if args.json or args.no_progress:
        summary = client.send(args.peer, size, mode=args.mode, deadline_s=args.deadline)
    else:
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        with Progress(
            TextColumn(f"[bold]{args.peer}[/] {args.mode} {{task.fields[tid]}}"),
            BarColumn(),
            DownloadColumn(binary_units=True),
            TransferSpeedColumn(),
            TextColumn("retx {task.fields[retx]}  retired {task.fields[retired]}"),
            transient=False,
        ) as bar:
            task = bar.add_task("send", total=size, retx=0, retired=0, tid="")

            def progress(ev: dict[str, Any]) -> None:
                bar.update(task, completed=ev["bytes_acked"], retx=ev["retransmissions"],
                           retired=ev["evs_retired"])  # fmt: skip

            summary = client.send(
                args.peer, size, mode=args.mode, on_progress=progress, deadline_s=args.deadline,
                on_started=lambda tid: bar.update(task, tid=tid),
            )  # fmt: skip
            bar.update(task, completed=summary["bytes_acked"])
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(summary)
    return 0 if summary["ok"] else 1


def _print_summary(s: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"transfer {s['transfer_id']} to {s['peer']} ({s['mode']})", show_header=False)
    verified = {True: "[green]yes[/]", False: "[red]NO[/]", None: "[yellow]no receipt[/]"}[s["verified"]]
    rows = [
        ("bytes", f"{s['bytes']} ({_fmt_bytes(s['bytes'])})"),
        ("time", f"{s['seconds']:.3f} s"),
        ("goodput", f"{s['goodput_mbit_s']:.1f} Mbit/s"),
        ("packets/s", f"{s['packets_per_s']:.0f}"),
        ("data packets", str(s["data_packets_sent"])),
        ("retransmissions", str(s["retransmissions"])),
        ("  of which, by loss", retx_causes_text(s)),
        ("EVs retired / restored", f"{s['evs_retired']} / {s['evs_restored']}"),
        ("receiver verified", verified),
        ("crc32", s["crc32"]),
    ]
    if s.get("error"):
        rows.append(("error", f"[red]{s['error']}[/]"))
    for k, v in rows:
        t.add_row(k, v)
    Console().print(t)


def _ev_table(rows: list[dict[str, Any]], title: str) -> Any:
    from rich.table import Table

    colour = STATE_COLOURS
    t = Table(title=title)
    for col in ("peer", "conn", "mode", "ev", "plane", "t1", "state", "data", "ctrl", "deliv", "lost",
                "ecn", "rx"):  # fmt: skip
        t.add_column(col, justify="right" if col not in ("peer", "conn", "mode", "ev", "state") else "left")
    for r in rows:
        st = r["state"] + ("" if r["active"] or r["state"] != "GOOD" else " (backup)")
        t.add_row(
            r["peer"], r["conn"], r["mode"], r["ev"], str(r["plane"]), str(r["t1"]),
            f"[{colour.get(r['state'], 'white')}]{st}[/]", str(r["data_sent"]), str(r["control_sent"]),
            str(r["delivered"]), str(r["lost"]), str(r["ecn"]), str(r["data_received"]),
        )  # fmt: skip
    return t


def cmd_stats(args: argparse.Namespace, client: AgentClient) -> int:
    reply = client.stats()
    if args.json:
        print(json.dumps(reply, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    con = Console()
    title = f"EVs of {reply['host']}"
    con.print(_ev_table(reply["evs"], title) if args.all else path_table(reply["evs"], title))
    tot = Table(title="totals", show_header=False)
    for k, v in sorted(reply["totals"].items()):
        tot.add_row(k, str(v))
    for p in reply["ports"]:
        io = p.get("io", "socket") + (f" ({p['why']})" if p.get("why") else "")
        tot.add_row(
            f"port {p['ifname']}",
            f"{io}: rx {p['frames_rx']}  tx {p['frames_tx']}  tx errors {p['tx_errors']}  "
            f"drops {p['socket_drops']}",
        )
    dep = reply.get("departures", {})
    if dep.get("clock") == "pacer":
        queues = "  ".join(f"max {p['max_queued']} waited {p['waited']}/{p['paced']}" for p in dep["ports"])
        tot.add_row("departure clock", f"pacer at {dep['rate_mbit_s']:g} Mbit/s: {queues}")
    else:
        tot.add_row("departure clock", "hand-over (no link rate: frames leave as the core hands them over)")
    tot.add_row("malformed", json.dumps(reply["malformed"]) or "{}")
    tot.add_row("refused (peer binding)", json.dumps(reply.get("refused", {})))
    tot.add_row("handshake", json.dumps(reply.get("handshake", {})))
    tot.add_row("kernel drops (nft)", json.dumps(reply["kernel_drops"]))
    con.print(tot)
    tr = reply["transfers"]
    if tr["sent"] or tr["received"]:
        t = Table(title="transfers")
        for col in ("dir", "peer", "id", "bytes", "ok", "Mbit/s"):
            t.add_column(col)
        for s in tr["sent"]:
            t.add_row(
                "sent", s["peer"], s["transfer_id"], str(s["bytes"]), str(s["ok"]), str(s["goodput_mbit_s"])
            )
        for r in tr["received"]:
            t.add_row("received", r["peer"], r["transfer_id"], str(r["received"]), str(r["ok"]), "")
        con.print(t)
    return 0


def cmd_evs(args: argparse.Namespace, client: AgentClient) -> int:
    rows = client.evs()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        from rich.console import Console

        Console().print(_ev_table(rows, "EVs") if args.all else path_table(rows, "EVs"))
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from mrc_host import ev_profile

    from .profile_view import describe, render

    overrides = {"evs": args.evs, "min_active": args.ev_min_active}
    try:
        prof = ev_profile.load(args.file)
        prof = ev_profile.parse(
            prof.as_dict() | {k: v for k, v in overrides.items() if v is not None}, str(args.file)
        )
        d = describe(prof, args.planes, args.t1, args.seed)
    except ValueError as exc:  # ProfileError names file and key; others: the fabric does not fit
        print(f"mrc profile: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(d, indent=1))
    else:
        from rich.console import Console

        Console().print(render(d, args.all))
    return 0


def cmd_deny_allow(args: argparse.Namespace, client: AgentClient) -> int:
    rule = {k: getattr(args, k) for k in RULE_KEYS if getattr(args, k) is not None}
    if (args.ev is None) == (not rule):
        raise ProtocolError("ev", "an EV or a rule (--plane, --t1, --field/--min/--max, --mask/--value)")
    call = client.deny if args.command == "deny" else client.allow
    reply = call(args.ev) if args.ev is not None else call(rule=rule)
    if args.json:
        print(json.dumps(reply, indent=2))
    elif rule:
        print(f"{args.command} {rule}: {reply['evs']} EV(s) on {reply['connections']} connection(s)")
    else:
        print(f"{args.command} {reply['ev']}: {reply['connections']} connection(s)")
    return 0


def plugin_commands() -> dict[str, Any]:
    """``mrc <name>`` commands of the layers above the agent (``mrc view``), by entry point.

    Looked up in the ``mrc.commands`` entry-point group (pyproject.toml), so this module
    imports nothing of those layers; each entry is a ``main(argv, prog)``.
    """
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group="mrc.commands")}


def cmd_cancel(args: argparse.Namespace, client: AgentClient) -> int:
    reply = client.cancel(args.transfer_id)
    if args.json:
        print(json.dumps(reply, indent=2))
    else:
        print(f"cancelled {reply['transfer_id']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] not in BUILTIN and not argv[0].startswith("-"):
        plugin = plugin_commands().get(argv[0])
        if plugin is not None:
            return int(plugin.load()(argv[1:], prog=f"mrc {argv[0]}"))
    args = build_parser().parse_args(argv)
    try:
        if args.command == "profile":
            return cmd_profile(args)
        if args.command == "serve":
            try:
                return cmd_serve(args)
            except (OSError, ValueError, KeyError, RuntimeError) as exc:  # config, sockets, nft
                print(f"mrc serve: {exc}", file=sys.stderr)
                return 1
        client = AgentClient(args.agent, timeout_s=30.0)
        handlers = {"send": cmd_send, "cancel": cmd_cancel, "stats": cmd_stats, "evs": cmd_evs,
                    "deny": cmd_deny_allow, "allow": cmd_deny_allow}  # fmt: skip
        return handlers[args.command](args, client)
    except ProtocolError as exc:
        print(f"mrc: {exc}", file=sys.stderr)
        return 2
    except AgentError as exc:
        if getattr(args, "json", False) and exc.reply:
            print(json.dumps(exc.reply, indent=2))
        print(f"mrc: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
