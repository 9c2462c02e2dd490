"""How deep BMv2's egress queues are: the program's ``egress_qdepth`` register, over Thrift.

The P4 program writes, for every data packet it sends, the depth of that port's data queue at
dequeue into ``egress_qdepth[port]`` (ingress reads it to trim). Read once a second, it is the
queue occupancy BMv2 exposes; a deep queue inside a switch whose link queue is empty means
the switch, not the link, is the bottleneck. BMv2's Python Thrift modules come with BMv2
(``/opt/p4bench/pyshim`` on PYTHONPATH); without them there is nothing to read, and the
figure is left out.
"""

from __future__ import annotations

import contextlib
from typing import Any

from mrc_fabric.p4names import Register

REGISTER = Register.EGRESS_QDEPTH
TIMEOUT_MS = 500


class Bmv2Queues:
    """One Thrift connection per switch (switch name -> Thrift port), opened on first read."""

    def __init__(self, ports: dict[str, int], host: str = "127.0.0.1") -> None:
        self.ports = ports
        self.host = host
        self._clients: dict[str, tuple[Any, Any]] = {}
        self.available = True

    def _client(self, switch: str) -> Any:
        if switch not in self._clients:
            from bm_runtime.standard import Standard
            from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
            from thrift.transport import TSocket, TTransport

            sock = TSocket.TSocket(self.host, self.ports[switch])
            sock.setTimeout(TIMEOUT_MS)
            transport = TTransport.TBufferedTransport(sock)
            protocol = TMultiplexedProtocol.TMultiplexedProtocol(
                TBinaryProtocol.TBinaryProtocol(transport), "standard"
            )
            transport.open()
            self._clients[switch] = (Standard.Client(protocol), transport)
        return self._clients[switch][0]

    def read(self) -> dict[str, int]:
        """Switch -> its deepest data queue (packets) as last dequeued; {} without Thrift."""
        if not self.available:
            return {}
        out: dict[str, int] = {}
        for switch in self.ports:
            try:
                depths = self._client(switch).bm_register_read_all(0, REGISTER)
                out[switch] = max((int(d) for d in depths), default=0)
            except ImportError:
                self.available = False
                return {}
            except Exception:  # a switch restarting, no program pushed yet: none this time
                self._drop(switch)
        return out

    def _drop(self, switch: str) -> None:
        client = self._clients.pop(switch, None)
        if client is not None:
            with contextlib.suppress(Exception):
                client[1].close()

    def close(self) -> None:
        for switch in list(self._clients):
            self._drop(switch)
