"""Who may talk to the view: the one who holds the token, through 127.0.0.1, by that name.

The view can inject faults, and any web page a user visits could otherwise reach a server
on localhost. So, as Jupyter does:

- the server listens on 127.0.0.1 only, on a port it prints with the full URL;
- the URL carries a random token (``secrets.token_urlsafe``, 256 bits); a request without
  it gets 403. The page's first load sets it as an HttpOnly, SameSite=Strict cookie (named
  after the port: cookies do not tell ports apart) so that its scripts, styles and the event
  stream load without the token in every URL; a cross-site page never sends that cookie;
- every action (a POST: fault, clear) must carry the token in the ``X-MRC-Token`` header as
  well, which a cross-origin page cannot set without a CORS preflight the server never
  grants, and an ``Origin`` other than the view's own is refused;
- the ``Host`` header must name the server (127.0.0.1:PORT or localhost:PORT): a DNS
  rebinding page reaches the server under its own name and is refused.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

TOKEN_HEADER = "X-MRC-Token"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def new_token() -> str:
    return secrets.token_urlsafe(32)


def cookie_name(port: int) -> str:
    return f"mrc_view_{port}"


def allowed_hosts(port: int) -> set[str]:
    return {f"127.0.0.1:{port}", f"localhost:{port}"}


def _same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


def guard(token: str, port_of: Callable[[], int]) -> Any:
    """aiohttp middleware: 403 unless the Host, the token (and for actions the header) are right."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        port = port_of()
        if request.headers.get("Host", "") not in allowed_hosts(port):
            raise web.HTTPForbidden(text="403: wrong Host header (this server answers 127.0.0.1 only)\n")
        via_query = _same(request.query.get("token"), token)
        via_cookie = _same(request.cookies.get(cookie_name(port)), token)
        if request.method not in ("GET", "HEAD"):
            origin = request.headers.get("Origin")
            if origin is not None and origin not in {f"http://{h}" for h in allowed_hosts(port)}:
                raise web.HTTPForbidden(text="403: cross-origin request\n")
            if not _same(request.headers.get(TOKEN_HEADER), token):
                raise web.HTTPForbidden(text=f"403: an action needs the token in {TOKEN_HEADER}\n")
        elif not (via_query or via_cookie):
            raise web.HTTPForbidden(text="403: no or wrong token (open the URL the view printed)\n")
        response = await handler(request)
        if response.prepared:  # a stream: its headers are out already
            return response
        if via_query and not via_cookie:
            response.set_cookie(cookie_name(port), token, httponly=True, samesite="Strict", path="/")
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
            "connect-src 'self'; frame-ancestors 'none'"
        )
        return response

    return middleware
