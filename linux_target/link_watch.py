"""Re-install a port's routes when it comes back up.

Setting an interface administratively down makes the kernel delete every IPv6
route and neighbour (permanent ones included) that uses it; they do not come
back with the link. A P4 switch keeps its tables across a port flap, so the
shim listens to link notifications and, when a port goes up again, puts back
what its tables say. Carrier loss alone (the peer going down) keeps routes
("linkdown") and needs nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pyroute2 import IPRoute
from pyroute2.netlink.rtnl import RTMGRP_LINK

from .ns_worker import enter_node

log = logging.getLogger(__name__)

IFF_UP = 0x1


class LinkWatcher:
    def __init__(
        self, ports: dict[int, str], on_up: Callable[[str], None], name: str = "", node_pid: int | None = None
    ) -> None:
        self.ifnames = set(ports.values())
        self.node_pid = node_pid  # its thread enters this node's network namespace (a shim group)
        self.on_up = on_up
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._ipr: IPRoute | None = None
        self._seen: dict[str, tuple[int, bool]] = {}
        self._thread = threading.Thread(target=self._run, name=f"{name}/link-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(timeout=10)

    def _run(self) -> None:
        # pyroute2 0.9's sync sockets belong to the thread that made them: make it here.
        try:
            if self.node_pid is not None:
                enter_node(self.node_pid, mount=False)
            self._ipr = IPRoute()
            self._ipr.bind(groups=RTMGRP_LINK)
        except OSError as exc:
            log.error("cannot watch the links (%s): a port set down and up again loses its routes", exc)
            self._ready.set()
            return
        for link in self._ipr.get_links():
            name = link.get_attr("IFLA_IFNAME")
            if name in self.ifnames:
                self._seen[name] = (link["index"], bool(link["flags"] & IFF_UP))
        self._ready.set()
        while not self._stop.is_set():
            try:
                messages = self._ipr.get()
            except Exception:  # the socket was closed by stop(), or netlink hiccuped
                if self._stop.is_set():
                    return
                log.exception("link watch failed; restarting the read")
                continue
            for msg in messages:
                if msg.get("event") != "RTM_NEWLINK":
                    continue
                name = msg.get_attr("IFLA_IFNAME")
                if name not in self.ifnames:
                    continue
                now = (msg["index"], bool(msg["flags"] & IFF_UP))
                before = self._seen.get(name)
                self._seen[name] = now
                if now[1] and before != now:
                    log.info("port %s is up: re-installing its routes and neighbours", name)
                    try:
                        self.on_up(name)
                    except Exception:
                        log.exception("re-installing %s failed", name)

    def stop(self) -> None:
        self._stop.set()
        if self._ipr is not None:
            self._ipr.close()
