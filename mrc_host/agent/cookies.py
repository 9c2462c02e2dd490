"""Handshake cookies: a CONNECT costs its receiver nothing until the sender proves it receives
packets at the address it claims (TCP's SYN cookies and QUIC's Retry are the models).

A CONNECT without a valid cookie is answered with a RETRY that carries one and nothing is
kept: the cookie is a keyed hash (BLAKE2s, a secret drawn when the agent starts) of the
CONNECT's queue pair (which names the peer host and the mode) and of the current time epoch;
the RETRY goes to the address the CONNECT claims, which must be one of that peer's NIC
addresses. Only a host that receives packets sent to the peer's addresses can echo it (from
any of its planes, for any of its CONNECTs on that queue pair); an off-path host that forges
a peer's address never sees the RETRY (it goes to the real peer).

Why per queue pair and not per CONNECT: a RETRY answering a *forged* CONNECT that claims the
peer still reaches the real peer, and now carries a cookie that opens the peer's own
connection -- so a flood of forged CONNECTs hands the claimed peer what it needs instead of
using up the RETRYs it would have got (``handshake.py`` takes such offered cookies). The receiver
checks a cookie against the current and the previous epoch, so one is good for
``COOKIE_EPOCH_NS`` to twice that, then the sender simply gets a new one.
"""

from __future__ import annotations

import hashlib
import os
import struct
from typing import Final

COOKIE_EPOCH_NS: Final = 30_000_000_000
_FIELDS: Final = struct.Struct(">qI")  # epoch, qp


class CookieJar:
    """Mints and checks cookies; holds only its secret."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else os.urandom(32)

    def _mac(self, epoch: int, qp: int) -> int:
        h = hashlib.blake2s(_FIELDS.pack(epoch, qp), key=self._secret, digest_size=4)
        return int.from_bytes(h.digest(), "big") or 1  # 0 means "no cookie" on the wire

    def mint(self, now_ns: int, qp: int) -> int:
        return self._mac(now_ns // COOKIE_EPOCH_NS, qp)

    def check(self, cookie: int, now_ns: int, qp: int) -> bool:
        """Whether ``cookie`` is one this jar minted for queue pair ``qp`` lately."""
        if not cookie:
            return False
        epoch = now_ns // COOKIE_EPOCH_NS
        return cookie in (self._mac(epoch, qp), self._mac(epoch - 1, qp))
