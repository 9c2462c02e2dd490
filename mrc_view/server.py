"""The view's web server (aiohttp): the page, its data, and the fault actions.

Routes (every one behind ``security.guard``):

    GET  /                  the page (static/index.html)
    GET  /static/<file>     its script and style, shipped in the package (no build step)
    GET  /api/info          live or replay, title, the fabric graph, link rate, duration
    GET  /api/stream        live: server-sent events, one frame per collector poll
    GET  /api/frame?t=S&rec=N   the frame at S seconds (replay; live: now)
    POST /api/fault         {kind, target, direction, probability, duration_s}: inject (live)
    POST /api/clear         {id} or {all: true}: clear (live)

Faults go through ``controller.northbound.ControllerClient``, the client ``mrcctl`` uses,
so the page can do exactly what an operator can and the controller checks every field.
The server runs in its own thread with its own event loop, so a testbed (``mrc-testbed
--view``, the CLI's ``view``) can serve it next to its own work.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from importlib import resources
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web

from controller.northbound import DIRECTIONS, KINDS

from . import security
from .limits import IDLE_S, ConnectionLimits
from .live import Collector
from .replay import Replay
from .security import Handler

STATIC = Path(str(resources.files("mrc_view") / "static"))
MAX_BODY = 16 << 10
KEEPALIVE_S = 10.0


class ViewServer:
    """Serves one live run (a ``Collector``) or the replays of a finished one."""

    def __init__(
        self,
        live: Collector | None = None,
        replays: list[Replay] | None = None,
        port: int = 0,
        token: str | None = None,
    ) -> None:
        if (live is None) == (not replays):
            raise ValueError("a view serves either a live run or replays")
        self.live = live
        self.replays = replays or []
        self.token = token or security.new_token()
        self.port = port
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._listener: asyncio.AbstractServer | None = None
        self.limits = ConnectionLimits()  # per client and in all (limits.py)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._frame_cache: tuple[int, bytes] = (-1, b"")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    # -- the app ----------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[self._busy, security.guard(self.token, lambda: self.port)], client_max_size=MAX_BODY
        )
        app.router.add_get("/", self.index)
        app.router.add_get("/static/{name}", self.static)
        app.router.add_get("/api/info", self.info)
        app.router.add_get("/api/stream", self.stream)
        app.router.add_get("/api/frame", self.frame)
        app.router.add_post("/api/fault", self.fault)
        app.router.add_post("/api/clear", self.clear)
        return app

    @web.middleware
    async def _busy(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Tell the connection caps a request is in progress (an idle connection may give way
        to a new one of the same client; a busy one may not)."""
        self.limits.request(request.transport, True)
        try:
            return await handler(request)
        finally:
            self.limits.request(request.transport, False)

    async def index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html", headers={"Content-Type": "text/html; charset=utf-8"})

    async def static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        files = {p.name: p for p in STATIC.iterdir() if p.is_file()}
        if name not in files:  # only the package's own files, by exact name: no paths
            raise web.HTTPNotFound()
        return web.FileResponse(files[name])

    async def info(self, request: web.Request) -> web.Response:
        head = self.live.head if self.live is not None else self._replay(request).head
        return web.json_response(
            {
                "mode": "live" if self.live is not None else "replay",
                "title": head.get("title", ""),
                "source": head.get("source", ""),
                "started_unix": head.get("started_unix", 0),
                "graph": head["graph"],
                "link_mbps": head.get("link_mbps", 0),
                "interval": self.live.interval if self.live is not None else 0.25,
                "recordings": [
                    {
                        "name": r.name,
                        "title": r.head.get("title", ""),
                        "duration": r.duration,
                        "fault_times": r.fault_times(),
                    }
                    for r in self.replays
                ],
                "kinds": sorted(KINDS),
                "directions": sorted(DIRECTIONS),
            }
        )

    def _replay(self, request: web.Request) -> Replay:
        try:
            n = int(request.query.get("rec", "0"))
        except ValueError:
            raise web.HTTPBadRequest(text="rec: not a number\n") from None
        if not 0 <= n < len(self.replays):
            raise web.HTTPBadRequest(text=f"rec: {n} is not one of 0..{len(self.replays) - 1}\n")
        return self.replays[n]

    def _live_frame(self) -> tuple[int, bytes]:
        assert self.live is not None
        with self.live.lock:
            version = self.live.model.version
            if version != self._frame_cache[0]:
                self._frame_cache = (version, json.dumps(self.live.model.frame()).encode())
            return self._frame_cache

    async def frame(self, request: web.Request) -> web.Response:
        if self.live is not None:
            return web.Response(body=self._live_frame()[1], content_type="application/json")
        try:
            t = float(request.query.get("t", "0"))
        except ValueError:
            raise web.HTTPBadRequest(text="t: not a number of seconds\n") from None
        if t != t:  # NaN
            raise web.HTTPBadRequest(text="t: not a number of seconds\n")
        replay = self._replay(request)
        data = await asyncio.get_running_loop().run_in_executor(None, replay.frame_at, t)
        return web.json_response(data)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        if self.live is None:
            raise web.HTTPNotFound(text="a replay has no stream: use /api/frame?t=\n")
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Content-Type-Options": "nosniff",
            }
        )
        await resp.prepare(request)
        with contextlib.suppress(ConnectionResetError):  # the page went away
            await self._frames(resp)
        return resp

    async def _frames(self, resp: web.StreamResponse) -> None:
        assert self.live is not None
        sent, quiet = -1, 0.0
        while True:
            version, data = self._live_frame()
            if version != sent:
                await resp.write(b"data: " + data + b"\n\n")
                sent, quiet = version, 0.0
            elif quiet >= KEEPALIVE_S:
                await resp.write(b": keepalive\n\n")
                quiet = 0.0
            await asyncio.sleep(self.live.interval / 2)
            quiet += self.live.interval / 2

    async def _body(self, request: web.Request) -> dict[str, Any]:
        if self.live is None:
            raise web.HTTPConflict(text="a replay injects no faults\n")
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            raise web.HTTPBadRequest(text="body: not JSON\n") from None
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(text="body: not a JSON object\n")
        return body

    async def fault(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        assert self.live is not None
        try:
            kind = _field(body, "kind", str, "")
            target = _field(body, "target", str, "")
            direction = _field(body, "direction", str, "both")
            prob = float(_field(body, "probability", (int, float), 0.0))
            duration = float(_field(body, "duration_s", (int, float), 0.0))
            period = float(_field(body, "period_s", (int, float), 0.0))
        except ValueError as exc:
            raise web.HTTPBadRequest(text=f"{exc}\n") from None
        ctl = self.live.controller

        def call() -> Any:
            return ctl.inject(kind, target, direction, prob, period, duration)

        f = await self._controller_call(call)
        return web.json_response({"id": f.id, "entries": list(f.entries)})

    async def clear(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        assert self.live is not None
        fault_id = body.get("id")
        if body.get("all") is True and fault_id is None:
            fid = None
        elif isinstance(fault_id, str) and fault_id and len(fault_id) <= 64:
            fid = fault_id
        else:
            raise web.HTTPBadRequest(text="id: a fault id, or all: true\n")
        ctl = self.live.controller
        cleared = await self._controller_call(lambda: ctl.clear(fid))
        return web.json_response({"cleared": cleared})

    async def _controller_call(self, fn: Any) -> Any:
        try:
            return await asyncio.get_running_loop().run_in_executor(None, fn)
        except ValueError as exc:
            raise web.HTTPBadRequest(text=f"{exc}\n") from None
        except grpc.RpcError as exc:
            errors: dict[grpc.StatusCode, type[web.HTTPException]] = {
                grpc.StatusCode.NOT_FOUND: web.HTTPNotFound,
                grpc.StatusCode.UNAVAILABLE: web.HTTPServiceUnavailable,
            }
            error = errors.get(exc.code(), web.HTTPBadRequest)
            raise error(text=f"controller: {exc.code().name}: {exc.details()}\n") from None

    # -- running ----------------------------------------------------------------------------------
    async def _start(self) -> None:
        # keepalive_timeout closes a connection with no complete request within IDLE_S (aiohttp
        # arms it when the connection opens) and one idle that long after its last request
        self._runner = web.AppRunner(
            self.app(), access_log=None, handle_signals=False, keepalive_timeout=IDLE_S
        )
        await self._runner.setup()
        assert self._runner.server is not None
        loop = asyncio.get_running_loop()
        factory = self.limits.wrap(self._runner.server)
        self._listener = await loop.create_server(factory, "127.0.0.1", self.port, reuse_address=True)
        self.port = int(self._listener.sockets[0].getsockname()[1])

    async def _stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def start(self) -> str:
        """Serve in a background thread; returns the URL once the port is bound."""

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._start())
            except BaseException as exc:
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            loop.run_forever()
            loop.run_until_complete(self._stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="mrc-view", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self.url

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if self.live is not None:
            self.live.stop()


def _field(body: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any) -> Any:
    value = body.get(name, default)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{name}: {str(value)[:64]!r} has the wrong type")
    if isinstance(value, str) and len(value) > 128:
        raise ValueError(f"{name}: longer than 128 characters")
    return value
