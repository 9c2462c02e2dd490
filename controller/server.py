"""``mrc-controller``: the northbound gRPC service (mrc.controller.v1.Controller).

Errors map to gRPC status codes with a message naming what was wrong and quoting at
most a bounded prefix of the bad input: an unknown switch, link, host or fault →
NOT_FOUND; a bad field (a number out of its bounds or not finite, a missing period, an
id together with all=true...) → INVALID_ARGUMENT naming the field (``spec.probability: ...``);
a switch without a live P4Runtime session → UNAVAILABLE naming the switch; a change the
state file cannot hold (a full disk, a directory gone) → UNAVAILABLE naming the file, and the
change is not made; a P4Runtime write refused by a switch → INTERNAL with the switch, table and
entry.

Threads: the server runs on its own asyncio loop (:class:`ControllerServer`). Unary calls run on
a pool of threads (the core blocks on the disk and the switches); ``WatchEvents`` streams are
coroutines on the loop, so any number of open ``mrcctl events`` costs no thread and never
starves ``mrcctl faults`` or ``clear --all`` (with one thread per stream, 16 streams did).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import select
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent import futures
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import grpc

from controller.core import ActiveFault, ControllerCore, PathInfo, StateUnavailable
from controller.faults import (
    Direction,
    FaultCapacityError,
    FaultError,
    FaultKind,
    FaultSpec,
    FaultTargetNotFound,
    quote,
)
from controller.p4rt_client import SwitchError, SwitchUnavailable
from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from controller.proto.mrc.controller.v1 import controller_pb2_grpc as pb_grpc
from mrc_fabric.p4_contract import read_pipeline
from mrc_fabric.p4info import P4InfoIndex, load_p4info
from mrc_fabric.p4names import missing_contract_names
from mrc_fabric.stop_wait import wait_for_stop
from mrc_fabric.thread_errors import install as install_thread_errors
from mrc_fabric.topology import Topology, TopologyError
from mrc_p4rt.channel import CONTROLLER_ELECTION_ID

log = logging.getLogger("mrc-controller")
PARENT = os.getppid()  # as early as may be: a standby whose parent is gone takes nothing over

SOCKET_NAME = "controller.sock"
KIND_FROM_PB = {
    pb.LINK_DOWN: FaultKind.LINK_DOWN,
    pb.BLACKHOLE: FaultKind.BLACKHOLE,
    pb.LOSS: FaultKind.LOSS,
    pb.FLAP: FaultKind.FLAP,
    pb.SWITCH_DOWN: FaultKind.SWITCH_DOWN,
    pb.NIC_PORT_DOWN: FaultKind.NIC_PORT_DOWN,
}
KIND_TO_PB = {v: k for k, v in KIND_FROM_PB.items()}
DIR_FROM_PB = {pb.BOTH: Direction.BOTH, pb.A_TO_B: Direction.A2B, pb.B_TO_A: Direction.B2A}
DIR_TO_PB = {v: k for k, v in DIR_FROM_PB.items()}

F = TypeVar("F", bound=Callable[..., Any])
SERVICE_NAME = "mrc.controller.v1.Controller"
LIST_PAGE_DEFAULT = 500  # ListFaults page size when the request gives none
LIST_PAGE_MAX = 1000  # a page of 1000 faults is about 150 kB, far below gRPC's 4 MB
MAX_STREAMS = 256  # open WatchEvents streams (each may hold 10,000 events); more: RESOURCE_EXHAUSTED


@dataclass(frozen=True)
class Undecodable:
    """A request whose bytes are no message of its type (garbage on the wire): handed to
    the method instead of failing in gRPC's deserializer, which would answer INTERNAL."""

    message: str


def _lenient(from_string: Callable[[bytes], Any], name: str) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        try:
            return from_string(data)
        except Exception as exc:
            return Undecodable(f"request: {len(data)} B are not a {name} ({type(exc).__name__})")

    return decode


def add_service(service: ControllerService, server: grpc.Server | grpc.aio.Server) -> None:
    """Register the service from its descriptor, as the generated code would, but with
    request decoders that turn garbage into INVALID_ARGUMENT (the generated ones make
    gRPC answer INTERNAL)."""
    handlers = {}
    for m in pb.DESCRIPTOR.services_by_name["Controller"].methods:
        request_type = getattr(pb, m.input_type.name)
        response_type = getattr(pb, m.output_type.name)
        make = (
            grpc.unary_stream_rpc_method_handler
            if m.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        handlers[m.name] = make(
            getattr(service, m.name),
            request_deserializer=_lenient(request_type.FromString, m.input_type.name),
            response_serializer=response_type.SerializeToString,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))


def grpc_errors(fn: F) -> F:
    """Turn the core's exceptions into gRPC status codes with their message."""

    @wraps(fn)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        if isinstance(request, Undecodable):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
        try:
            return fn(self, request, context)
        except FaultError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except FaultCapacityError as exc:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        except (FaultTargetNotFound, KeyError) as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, exc.args[0] if exc.args else str(exc))
        except SwitchUnavailable as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        except StateUnavailable as exc:  # refused: nothing was changed
            context.abort(grpc.StatusCode.UNAVAILABLE, exc.strerror or str(exc))
        except SwitchError as exc:
            context.abort(grpc.StatusCode.INTERNAL, str(exc))
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except Exception as exc:  # a bug: say so precisely (bounded), log it, keep serving
            log.exception("%s failed", fn.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"{fn.__name__}: {type(exc).__name__}: {exc}"[:300])

    return wrapper  # type: ignore[return-value]


def spec_from_pb(spec: pb.FaultSpec) -> FaultSpec:
    if spec.kind not in KIND_FROM_PB:
        raise FaultError("spec.kind", f"{spec.kind} is not a fault kind")
    if spec.direction not in DIR_FROM_PB:
        raise FaultError("spec.direction", f"{spec.direction} is not a direction")
    return FaultSpec(
        KIND_FROM_PB[spec.kind],
        spec.target,
        DIR_FROM_PB[spec.direction],
        spec.probability,
        spec.period_s,
        spec.duration_s,
    )


def path_to_pb(p: PathInfo) -> pb.Path:
    w = p.walk
    return pb.Path(
        ev=p.ev,
        plane=p.plane,
        t1=p.t1,
        carrier=p.carrier,
        hops=[
            pb.Hop(
                node=h.node,
                in_port=h.in_port,
                out_port=-1 if h.out_port is None else h.out_port,
                dst=str(h.dst),
                note=h.note,
            )
            for h in w.hops
        ],
        status=p.status,
        drop_reason=w.dropped.value if w.dropped else "",
        drop_at=w.dropped_at,
        survival=w.survival,
        delivered_to=f"{w.delivered_to[0]}:{w.delivered_to[1]}" if w.delivered_to else "",
        unreachable=list(p.unreachable),
        silent=p.silent,
    )


class ControllerService(pb_grpc.ControllerServicer):  # type: ignore[misc]
    def __init__(self, core: ControllerCore) -> None:
        self.core = core
        self._closing = threading.Event()
        self.streams = 0  # open WatchEvents streams (only the event loop changes it)

    def close(self) -> None:
        """End every stream (the bus's end marker wakes each one)."""
        self._closing.set()
        self.core.events.close()

    def _fault_pb(self, f: ActiveFault) -> pb.Fault:
        s = f.spec
        return pb.Fault(
            id=f.id,
            spec=pb.FaultSpec(
                kind=KIND_TO_PB[s.kind],
                target=s.target,
                direction=DIR_TO_PB[s.direction],
                probability=s.probability,
                period_s=s.period_s,
                duration_s=s.duration_s,
            ),
            created_at=f.created_at,
            expires_at=f.expires_at,
            active=f.active,
            entries=self.core.fault_entry_descriptions(f),
        )

    @grpc_errors
    def GetTopology(
        self, request: pb.GetTopologyRequest, context: grpc.ServicerContext
    ) -> pb.GetTopologyResponse:
        return pb.GetTopologyResponse(topology_json=self.core.topo.to_json())

    @grpc_errors
    def InstallRoutes(
        self, request: pb.InstallRoutesRequest, context: grpc.ServicerContext
    ) -> pb.InstallRoutesResponse:
        counts = self.core.install_routes(list(request.switches) or None)
        directory = self.core.host_config_dir()
        return pb.InstallRoutesResponse(
            switches=[pb.SwitchInstall(switch=n, entries=c) for n, c in counts.items()],
            total_entries=sum(counts.values()),
            host_config_dir=str(directory) if directory else "",
        )

    @grpc_errors
    def InjectFault(self, request: pb.InjectFaultRequest, context: grpc.ServicerContext) -> pb.Fault:
        if not request.HasField("spec"):
            raise FaultError("spec", "missing")
        return self._fault_pb(self.core.inject_fault(spec_from_pb(request.spec)))

    @grpc_errors
    def ClearFault(
        self, request: pb.ClearFaultRequest, context: grpc.ServicerContext
    ) -> pb.ClearFaultResponse:
        if request.all and request.id:
            raise FaultError("id", "give a fault id or all=true, not both")
        if request.all:
            return pb.ClearFaultResponse(cleared=self.core.clear_all())
        if not request.id:
            raise FaultError("id", "give a fault id or all=true")
        return pb.ClearFaultResponse(cleared=self.core.clear_fault(request.id))

    @grpc_errors
    def ListFaults(
        self, request: pb.ListFaultsRequest, context: grpc.ServicerContext
    ) -> pb.ListFaultsResponse:
        size = request.page_size or LIST_PAGE_DEFAULT
        if size > LIST_PAGE_MAX:
            raise FaultError("page_size", f"{size} is above {LIST_PAGE_MAX}")
        after = 0
        if request.page_token:
            token = request.page_token
            if not (token.startswith("f") and token[1:].isdigit() and len(token) <= 20):
                raise FaultError("page_token", f"{quote(token)} is no next_page_token this server gave")
            after = int(token[1:])
        faults = sorted((int(f.id[1:]), f) for f in self.core.faults())
        page = [f for n, f in faults if n > after][: size + 1]
        more = len(page) > size
        page = page[:size]
        return pb.ListFaultsResponse(
            faults=[self._fault_pb(f) for f in page], next_page_token=page[-1].id if more else ""
        )

    @grpc_errors
    def GetCounters(
        self, request: pb.GetCountersRequest, context: grpc.ServicerContext
    ) -> pb.GetCountersResponse:
        cells, errors = self.core.counters(list(request.switches) or None)
        return pb.GetCountersResponse(
            counters=[
                pb.CounterValue(
                    switch=c.switch,
                    counter=c.counter,
                    index=c.index,
                    label=c.label,
                    packets=c.packets,
                    bytes=c.bytes,
                )
                for c in cells
            ],
            errors=errors,
        )

    @grpc_errors
    def ListPaths(self, request: pb.ListPathsRequest, context: grpc.ServicerContext) -> pb.ListPathsResponse:
        for field, name in (("src", request.src), ("dst", request.dst)):
            if not name:
                raise FaultError(field, "missing host name")
            if not self.core.topo.has_host(name):
                raise KeyError(f"{field}: no host {quote(name)}")
        return pb.ListPathsResponse(
            paths=[path_to_pb(p) for p in self.core.paths(request.src, request.dst, request.ecmp)]
        )

    @grpc_errors
    def GetHealth(self, request: pb.GetHealthRequest, context: grpc.ServicerContext) -> pb.GetHealthResponse:
        return pb.GetHealthResponse(
            switches=[
                pb.SwitchHealth(
                    switch=h.name,
                    address=h.address,
                    reachable=h.reachable,
                    primary=h.primary,
                    last_error=h.last_error,
                    reconciles=h.reconciles,
                    pipeline_pushes=h.pipeline_pushes,
                    dataplane=h.dataplane.state if h.dataplane else "",
                    dataplane_detail=h.dataplane.detail if h.dataplane else "",
                )
                for h in self.core.switch_health()
            ],
            agents=[
                pb.AgentHealth(host=a.host, socket=str(a.socket), state=a.state, detail=a.detail)
                for a in self.core.agent_health()
            ],
            links=[
                pb.LinkHealth(
                    link=d.name, sender=d.sender, receiver=d.receiver, state=v.state, detail=v.detail
                )
                for d, v in sorted(self.core.dataplane.verdicts()[0].items(), key=lambda kv: kv[0].name)
            ],
        )

    async def WatchEvents(
        self, request: pb.WatchEventsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.Event]:
        """A coroutine on the server's loop: waiting for the next event holds no thread."""
        if isinstance(request, Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
        if self.streams >= MAX_STREAMS:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED, f"{self.streams} event streams are open (MAX_STREAMS)"
            )
        self.streams += 1
        sub = self.core.events.subscribe_async(asyncio.get_running_loop())
        try:
            while not self._closing.is_set():
                e = await sub.get()
                if e is None:
                    return
                yield pb.Event(
                    timestamp=e.timestamp,
                    kind=e.kind,
                    switch=e.switch,
                    fault_id=e.fault_id,
                    message=e.message,
                )
        finally:
            self.streams -= 1
            self.core.events.unsubscribe(sub)


def default_listen(topology_path: Path) -> str:
    return f"unix:{topology_path.resolve().parent / SOCKET_NAME}"


def check_listen(address: str) -> None:
    """Only a unix socket or a loopback TCP address: the API has no authentication."""
    if address.startswith("unix:"):
        return
    host, _, port = address.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "[::1]") or not port.isdigit():
        raise ValueError(f"--listen: {address!r} must be unix:PATH or 127.0.0.1:PORT (loopback only)")


class ControllerServer:
    """The gRPC server on an asyncio loop of its own thread: streams on the loop, unary calls on
    a pool of ``max_workers`` threads. :meth:`stop` returns an Event set once it has stopped
    (as ``grpc.Server.stop`` does)."""

    def __init__(self, max_workers: int) -> None:
        self._loop = asyncio.new_event_loop()
        self._pool = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="ctl")
        self._thread = threading.Thread(target=self._loop.run_forever, name="ctl-loop", daemon=True)
        self._thread.start()
        self._server: grpc.aio.Server | None = None
        self._stopped = threading.Event()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def start(self, service: ControllerService, listen: str) -> int:
        """Serve ``service`` on ``listen``; the port bound (0: none)."""
        self._server = grpc.aio.server(migration_thread_pool=self._pool)
        add_service(service, self._server)
        old_umask = os.umask(0o177)  # the socket file is 0600 from its creation...
        try:
            port = int(self._server.add_insecure_port(listen))
        finally:
            os.umask(old_umask)
        if port:
            await self._server.start()
        return port

    def stop(self, grace: float | None) -> threading.Event:
        async def stop() -> None:
            if self._server is not None:
                await self._server.stop(grace)

        def done(_: object) -> None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._stopped.set()

        if not self._stopped.is_set():
            asyncio.run_coroutine_threadsafe(stop(), self._loop).add_done_callback(done)
        return self._stopped


def serve(
    core: ControllerCore, listen: str, max_workers: int = 16
) -> tuple[ControllerServer, ControllerService, str]:
    """Start the gRPC server; returns it, the servicer and the bound address (port 0 → real port)."""
    check_listen(listen)
    if listen.startswith("unix:"):
        path = Path(listen[len("unix:") :])
        if path.exists() and path.is_socket():
            path.unlink()
    server = ControllerServer(max_workers)
    service = ControllerService(core)
    port = server.run(server.start(service, listen))
    if port == 0:
        server.stop(grace=None).wait(5)
        raise OSError(f"--listen: could not bind {listen}")
    if listen.startswith("unix:"):
        os.chmod(listen[len("unix:") :], 0o600)  # ...and set explicitly: only its owner may talk to it
    bound = listen if listen.startswith("unix:") else f"{listen.rpartition(':')[0]}:{port}"
    return server, service, bound


def wait_for_exit(pid: int, parent: int = PARENT) -> bool:
    """Block until process ``pid`` exits (True), or until process ``parent`` does (False).

    Why a pid for the parent: the parent read from ``os.getppid()`` at import is wrong when the
    parent exited before this interpreter finished its imports (a second or more on a busy
    machine): the standby would then see the reaper as its parent and wait on forever. The
    testbed passes its own pid (``--parent``); both waits are pidfds, so neither is polled."""
    try:
        parent_fd = os.pidfd_open(parent)
    except ProcessLookupError:
        return False  # the parent went before we could watch it: nothing to take over
    try:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return True
        try:
            ready = select.select([fd, parent_fd], [], [])[0]
            return parent_fd not in ready  # (both at once: no parent, so nobody to serve)
        finally:
            os.close(fd)
    finally:
        os.close(parent_fd)


def add_pipeline_arguments(ap: argparse.ArgumentParser) -> None:
    """How the controller holds the switches and which program it pushes to them."""
    ap.add_argument(
        "--election-id",
        type=int,
        default=CONTROLLER_ELECTION_ID,
        help="its P4Runtime election id (default (2,0) = 2**65: above p4runtime-shell's default (1,0))",
    )
    ap.add_argument(
        "--p4info",
        type=Path,
        help="P4Info text file of the program the BMv2 switches run (default: the run directory's "
        "p4/pipeline.json, else the committed one); it must keep the MRC contract "
        "(mrc_fabric.p4_contract); its other tables stay the user's",
    )
    ap.add_argument(
        "--bmv2-json", type=Path, help="the BMv2 JSON of that program (default: p4src/build/mrc_switch.json)"
    )


def pipeline_options(run_dir: Path, p4info: Path | None, bmv2_json: Path | None) -> dict[str, Any]:
    """ControllerCore's index and BMv2 JSON for a user's program: the options', else the run
    directory's (``p4/pipeline.json``, ``mrc-testbed --p4``); ValueError naming every gap of its
    P4Info against the MRC contract (mrc_fabric.p4_contract)."""
    recorded = read_pipeline(run_dir) if p4info is None and bmv2_json is None else None
    if recorded is not None:
        p4info, bmv2_json = Path(recorded["p4info"]), Path(recorded["bmv2_json"])
    out: dict[str, Any] = {}
    if bmv2_json is not None:
        out["bmv2_json"] = bmv2_json
    if p4info is not None:
        try:
            info = load_p4info(p4info)
        except Exception as exc:  # a text-format parse error names line and column
            raise ValueError(f"--p4info {p4info}: {exc}") from None
        gaps = missing_contract_names(info)
        if gaps:
            raise ValueError(f"--p4info {p4info} does not keep the MRC contract: " + "; ".join(gaps))
        out["index"] = P4InfoIndex(info)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mrc-controller", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--topology", required=True, type=Path, help="run/topology.json written by the topology script"
    )
    ap.add_argument("--listen", help="unix:PATH or 127.0.0.1:PORT (default: unix:<run dir>/controller.sock)")
    ap.add_argument("--install", action="store_true", help="install the routes once every switch is up")
    ap.add_argument(
        "--wait", type=float, default=30.0, help="seconds to wait for the switches with --install"
    )
    add_pipeline_arguments(ap)
    ap.add_argument(
        "--state-file",
        type=Path,
        help="keep the installed routes and the faults here and take them up again at start "
        "(a restarted controller then keeps the switches' tables as they are)",
    )
    ap.add_argument(
        "--standby-for",
        type=int,
        metavar="PID",
        help="wait, imports done, until process PID (the controller serving now) exits, then take "
        "over: a restart without an interpreter start (the testbed keeps one such standby)",
    )
    ap.add_argument(
        "--parent",
        type=int,
        metavar="PID",
        default=PARENT,
        help="with --standby-for: a standby whose process PID exits first takes nothing over "
        "(default: the parent process as read at start-up, wrong if it exits sooner)",
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    if args.standby_for and not wait_for_exit(args.standby_for, args.parent):
        return 0  # our parent went away first: nothing to take over
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(message)s"
    )
    install_thread_errors(lambda line: log.error("%s", line))
    try:
        topo = Topology.load(args.topology)
    except (OSError, TopologyError) as exc:
        print(f"mrc-controller: {args.topology}: {exc}", file=sys.stderr)
        return 2
    listen = args.listen or default_listen(args.topology)
    try:
        core = ControllerCore(
            topo,
            run_dir=args.topology.resolve().parent,
            election_id=args.election_id,
            state_file=args.state_file,
            **pipeline_options(args.topology.resolve().parent, args.p4info, args.bmv2_json),
        )
        core.start()
        server, service, bound = serve(core, listen)
    except (OSError, ValueError) as exc:
        print(f"mrc-controller: {exc}", file=sys.stderr)
        return 2
    log.info("mrc-controller %d: serving %d switches on %s", os.getpid(), len(topo.switches), bound)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if args.install:
        missing = core.wait_ready(args.wait)
        if missing:
            log.error("switches not up after %.0fs: %s", args.wait, ", ".join(missing))
        else:
            counts = core.install_routes()
            log.info("installed %d entries", sum(counts.values()))
    wait_for_stop(stop)  # (not ``stop.wait()``: a signal another thread takes would not wake it)
    service.close()
    server.stop(grace=1).wait()
    core.stop()
    if listen.startswith("unix:"):
        Path(listen[len("unix:") :]).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
