"""``mrcctl``: the operator's command line for the MRC controller.

Human tables by default (rich), ``--json`` for scripts. The controller address comes
from ``--controller``, else ``$MRC_CONTROLLER``, else ``unix:<run dir>/controller.sock``
with the run directory from ``--run-dir`` or ``$MRC_RUN_DIR`` (default ``runs/latest``).
``mrcctl plan`` needs no controller.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict
from rich.console import Console
from rich.table import Table

from controller.fault_cli import add_fault_arguments, clock_time, faults_table, inject
from controller.northbound import ControllerClient
from controller.planner import FabricPlan, PlanError, compare, plan_fabric
from controller.proto.mrc.controller.v1 import controller_pb2 as pb

DEFAULT_RUN_DIR = "runs/latest"


def controller_address(args: argparse.Namespace) -> str:
    if args.controller:
        return str(args.controller)
    if os.environ.get("MRC_CONTROLLER"):
        return os.environ["MRC_CONTROLLER"]
    run_dir = Path(args.run_dir or os.environ.get("MRC_RUN_DIR") or DEFAULT_RUN_DIR)
    return f"unix:{run_dir.resolve() / 'controller.sock'}"


def _tier_switches(tier: int, p: FabricPlan) -> str:
    return f"{p.tier_counts[tier].switches:,}" if tier < p.tiers else "-"


class Cli:
    def __init__(self, args: argparse.Namespace, out: Console) -> None:
        self.args = args
        self.out = out
        self._client: ControllerClient | None = None

    @property
    def client(self) -> ControllerClient:
        if self._client is None:
            self._client = ControllerClient(controller_address(self.args))
        return self._client

    def emit(self, message: Any, table: Callable[[], Table | str]) -> None:
        if self.args.json:
            data = (
                message
                if isinstance(message, dict)
                else MessageToDict(message, preserving_proto_field_name=True)
            )
            print(json.dumps(data, indent=2, sort_keys=True))
        else:
            self.out.print(table())

    # -- commands --------------------------------------------------------------------------------
    def install(self) -> None:
        resp = self.client.install_routes(switches=self.args.switches, retry_unavailable=False)

        def table() -> Table:
            t = Table("switch", "entries", title=f"{resp.total_entries} entries installed")
            for s in resp.switches:
                t.add_row(s.switch, str(s.entries))
            if resp.host_config_dir:
                t.caption = f"host configs: {resp.host_config_dir}"
            return t

        self.emit(resp, table)

    def fault(self) -> None:
        f = inject(self.client, self.args)
        self.emit(f, lambda: faults_table([f], title=f"fault {f.id} injected"))

    def clear(self) -> None:
        if not self.args.id and not self.args.all:
            raise SystemExit("mrcctl clear: give a fault id or --all")
        if self.args.id and self.args.all:
            raise SystemExit("mrcctl clear: give a fault id or --all, not both")
        cleared = self.client.clear(None if self.args.all else self.args.id)
        self.emit({"cleared": cleared}, lambda: f"cleared: {', '.join(cleared) or 'nothing'}")

    def faults(self) -> None:
        resp = pb.ListFaultsResponse(faults=self.client.faults())
        self.emit(resp, lambda: faults_table(resp.faults, title="active faults"))

    def paths(self) -> None:
        resp = pb.ListPathsResponse(paths=self.client.paths(self.args.src, self.args.dst, self.args.ecmp))

        def table() -> Table:
            t = Table(
                "ev", "plane", "t1", "carrier", "hops", "status", title=f"{self.args.src} → {self.args.dst}"
            )
            for p in resp.paths:
                hops = " → ".join(
                    f"{h.node}({h.in_port}>{h.out_port if h.out_port >= 0 else 'x'})" for h in p.hops
                )
                t.add_row(*path_row(p, hops))
            return t

        self.emit(resp, table)

    def counters(self) -> None:
        switches = [self.args.switch] if self.args.switch else []
        resp = self.client.get_counters(switches)

        def table() -> Table:
            t = Table("switch", "counter", "index", "label", "packets", "bytes", title="counters")
            for c in resp.counters:
                t.add_row(c.switch, c.counter, str(c.index), c.label, str(c.packets), str(c.bytes))
            if resp.errors:
                t.caption = "errors: " + "; ".join(resp.errors)
            return t

        self.emit(resp, table)

    def events(self) -> None:
        try:
            for e in self.client.events():
                if self.args.json:
                    print(
                        json.dumps(MessageToDict(e, preserving_proto_field_name=True), sort_keys=True),
                        flush=True,
                    )
                else:
                    who = " ".join(x for x in (e.switch, e.fault_id) if x)
                    self.out.print(f"{clock_time(e.timestamp)} {e.kind:20} {who:12} {e.message}")
        except KeyboardInterrupt:
            pass

    def health(self) -> None:
        resp = self.client.health()
        self.emit(resp, lambda: health_tables(resp))
        if any(not s.reachable for s in resp.switches) or any(a.state == "dead" for a in resp.agents):
            raise SystemExit(3)  # scripts can tell a degraded fabric by the exit status

    def topology(self) -> None:
        print(self.client.topology_json(), end="")

    def plan(self) -> None:
        a = self.args
        try:
            if a.compare:
                c = compare(a.gpus, a.nic_gbps, a.planes, a.switch_tbps, a.tiers, a.single_tiers)
                plans = {"multi-plane": c.multi_plane, "single-plane": c.single_plane}
                data: dict[str, Any] = c.to_dict()
            else:
                p = plan_fabric(a.gpus, a.nic_gbps, a.planes, a.switch_tbps, a.tiers)
                plans = {f"{a.planes}-plane": p}
                data = p.to_dict()
        except PlanError as exc:
            raise SystemExit(f"mrcctl plan: {exc}") from exc

        def table() -> Table:
            t = Table(
                "", *plans, title=f"{a.gpus:,} GPUs, {a.nic_gbps:g}G NICs, {a.switch_tbps:g} Tb/s switches"
            )
            rows: list[tuple[str, Callable[[FabricPlan], str]]] = [
                ("planes x port speed", lambda p: f"{p.planes} x {p.port_gbps:g}G"),
                ("tiers", lambda p: str(p.tiers)),
                ("switch ports", lambda p: str(p.switch_ports)),
                *[
                    (
                        f"T{i} switches",
                        partial(_tier_switches, i),
                    )
                    for i in range(max(x.tiers for x in plans.values()))
                ],
                ("switches", lambda p: f"{p.switches:,}"),
                ("host links", lambda p: f"{p.host_links:,}"),
                ("switch links", lambda p: f"{p.switch_links:,}"),
                ("optics (800G modules)", lambda p: f"{p.optics_modules:,.0f}"),
                ("longest path (switches)", lambda p: str(p.longest_path_switches)),
                ("one T0 uplink lost", lambda p: f"{p.link_loss_fraction:.2%}"),
                ("one NIC port lost", lambda p: f"{p.nic_port_loss_fraction:.2%}"),
                ("strict fat-tree max GPUs", lambda p: f"{p.max_gpus_strict:,}"),
            ]
            for label, fn in rows:
                t.add_row(label, *(fn(p) for p in plans.values()))
            if a.compare:
                t.caption = (
                    f"optics ratio {data['optics_ratio']:.3f}, switch ratio {data['switch_ratio']:.3f}"
                )
            return t

        self.emit(data, table)


def path_row(p: Any, hops: str) -> list[str]:
    """One walked path (a ``PathView``) as a row of the paths table (ev, plane, t1, carrier,
    hops, status); this CLI and the testbed shell each write ``hops`` their own way."""
    return [f"{p.ev:08x}", str(p.plane), str(p.t1) if p.t1 >= 0 else "-", p.carrier, hops, path_status(p)]


def path_status(p: Any) -> str:
    """The status cell of one walked path, in rich markup: what became of its packets and where."""
    if p.status == "dropped":
        return f"[red]dropped[/red] {p.drop_reason} at {p.drop_at}"
    if p.status == "unreachable":
        return f"[red]unreachable[/red] switch {', '.join(p.unreachable)} has no session"
    if p.status == "lossy":
        return f"[yellow]lossy[/yellow] survival {p.survival:.3f}"
    return f"[green]ok[/green] → {p.delivered_to}"


def health_tables(resp: pb.GetHealthResponse) -> Table:
    """Switches then agents, one row each, unhealthy ones in red."""
    t = Table("kind", "name", "state", "detail", title="health")
    for s in resp.switches:
        if not s.reachable:
            state = "[red]unreachable[/red]"
        elif s.primary:
            state = "[green]primary[/green]"
        else:
            state = "[yellow]backup[/yellow]"
        detail = f"reconciles {s.reconciles}, pipeline pushes {s.pipeline_pushes}"
        t.add_row("switch", s.switch, state, f"{s.last_error or detail} ({s.address})")
    for a in resp.agents:
        color = {"alive": "green", "dead": "red"}.get(a.state, "yellow")
        t.add_row("agent", a.host, f"[{color}]{a.state}[/{color}]", a.detail or a.socket)
    return t


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mrcctl", description="Operate the MRC testbed controller.")
    ap.add_argument(
        "--controller", help="unix:PATH or 127.0.0.1:PORT (default: $MRC_CONTROLLER or the run dir)"
    )
    ap.add_argument(
        "--run-dir", help="run directory holding controller.sock (default: $MRC_RUN_DIR or runs/latest)"
    )
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("install", help="install the compiled routes")
    p.add_argument("switches", nargs="*", help="only these switches (default: all)")
    add_fault_arguments(sub.add_parser("fault", help="inject a fault"))
    p = sub.add_parser("clear", help="clear a fault (or --all)")
    p.add_argument("id", nargs="?")
    p.add_argument("--all", action="store_true")
    sub.add_parser("faults", help="list active faults")
    p = sub.add_parser("paths", help="every path from SRC to DST with its hops and fault status")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--ecmp", action="store_true", help="the ECMP baseline's carriers")
    p = sub.add_parser("counters", help="switch counters")
    p.add_argument("switch", nargs="?")
    sub.add_parser("events", help="follow fault and switch events (Ctrl-C stops)")
    sub.add_parser("health", help="switch sessions and host agents (exit 3 when one is down)")
    sub.add_parser("topology", help="print the topology JSON")
    p = sub.add_parser("plan", help="size a fabric (no controller needed)")
    p.add_argument("--gpus", type=int, default=131072)
    p.add_argument("--nic-gbps", type=float, default=800)
    p.add_argument("--planes", type=int, default=8, help="NIC ports = planes")
    p.add_argument("--switch-tbps", type=float, default=51.2)
    p.add_argument("--tiers", type=int, default=2)
    p.add_argument(
        "--compare", action="store_true", help="against a single-plane design of --single-tiers tiers"
    )
    p.add_argument("--single-tiers", type=int, default=3)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # piped output (scripts, logs) gets wide tables instead of rich's 80-column default
    cli = Cli(args, Console() if sys.stdout.isatty() else Console(width=200))
    try:
        getattr(cli, args.command)()
    except grpc.RpcError as exc:
        print(f"mrcctl {args.command}: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `mrcctl --json ... | head`
        sys.stderr.close()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
