"""Transfer bookkeeping: deadlines, dead-peer detection and receipts, on a real SendConnection."""

from __future__ import annotations

import random

from controller.compiler import compile_host_configs
from mrc_fabric.hostconfig import HostConfig
from mrc_fabric.topology import build_clos
from mrc_host.agent.connection import SendConnection, Transfer
from mrc_host.agent.paths import ROLE_SENDER, HostPaths, QpId
from mrc_host.agent.transfers import RECEIPT_TIMEOUT_NS, TransferBook
from mrc_host.core import Mode, TransportConfig

S = 1_000_000_000


def _conn(established: bool = True) -> SendConnection:
    cfgs: dict[str, HostConfig] = compile_host_configs(build_clos(2, 2, 2, 2, prefix="ut"))
    a = HostPaths(cfgs["uth0"])
    qp = QpId(ROLE_SENDER, Mode.MRC, a.index, 3)
    conn = SendConnection(qp, a.peer("uth3", Mode.MRC), TransportConfig(), random.Random(1))
    conn.established = established
    conn.rkey = 1
    return conn


def _book(conn: SendConnection, deadline_s: float = 60.0) -> tuple[TransferBook, Transfer]:
    book = TransferBook()
    t = Transfer(7, "uth3", "mrc", 10_000, seed=1, started_ns=0)
    book.start(conn, t, None, False, deadline_s, 0)
    return book, t


def test_a_silent_peer_is_reported_dead_after_the_peer_timeout() -> None:
    book, t = _book(_conn())
    assert book.expired(1 * S, peer_timeout_s=10) == []  # first look: the clock starts
    t.bytes_acked = 4096
    assert book.expired(5 * S, 10) == []  # progress restarts the clock
    assert book.expired(14 * S, 10) == []
    (e,) = book.expired(15 * S + 1, 10)
    assert e.peer_dead and "uth3 stopped answering" in e.error and "4096 of 10000" in e.error


def test_no_dead_peer_while_the_handshake_is_pending_but_the_deadline_still_holds() -> None:
    book, _t = _book(_conn(established=False), deadline_s=30)
    assert book.expired(20 * S, 10) == []
    (e,) = book.expired(30 * S, 10)
    assert not e.peer_dead and e.error.startswith("deadline: not done after 30.0 s")


def test_receipts_finish_transfers_and_strays_are_told_apart() -> None:
    book, t = _book(_conn())
    t.chunks_total, t.chunks_posted, t.chunks_acked, t.crc = 1, 1, 1, 0x0BADC0DE
    assert book.on_receipt("uth2", 7, True, 10_000, 0x0BADC0DE) is None  # wrong peer
    assert book.on_receipt("uth3", 8, True, 10_000, 0x0BADC0DE) is None  # unknown transfer
    assert book.on_receipt("uth3", 7, True, 10_000, 0x0BADC0DE) is True
    assert t.receipt == {"ok": True, "bytes": 10_000, "crc32": "0badc0de"}
    done = book.finish(7, 3 * S)
    assert done is not None and book.finish(7, 3 * S) is None
    assert [s["transfer_id"] for s in book.sent] == [f"{7:016x}"]


def test_a_missing_receipt_ends_the_transfer() -> None:
    book, t = _book(_conn())
    t.chunks_total = t.chunks_acked = 1
    t.acked_ns = 1 * S
    assert book.expired(1 * S + RECEIPT_TIMEOUT_NS, 10) == []
    (e,) = book.expired(1 * S + RECEIPT_TIMEOUT_NS + 1, 10)
    assert e.error == "no receipt from the receiver" and not e.peer_dead
