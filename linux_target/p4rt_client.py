"""A minimal synchronous P4Runtime client for readiness checks, tests and debugging.

The controller keeps persistent sessions; this one exists so the shim can be checked
without it: wait until a shim answers, arbitrate, push the pipeline, write and read
entries by P4Info names. It calls the stub directly and lets ``grpc.RpcError`` through,
so protocol tests see exactly what the server sent; the entry encoding, the decoding of
a failed Write and the error type are the ones the controller uses (:mod:`mrc_p4rt`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc
from finsy.proto import p4i, p4r, p4r_grpc

from mrc_fabric.p4info import P4InfoIndex, default_index
from mrc_p4rt.channel import arbitration_request, set_election_id, wait_until_serving
from mrc_p4rt.codec import LooseMatch, build_entry
from mrc_p4rt.status import P4RuntimeCallError

__all__ = ["P4RuntimeCallError", "P4RuntimeTestClient", "wait_until_serving"]


@dataclass
class P4RuntimeTestClient:
    """One StreamChannel plus unary calls to one switch."""

    address: str
    device_id: int
    election_id: int
    index: P4InfoIndex = field(default_factory=default_index)

    def __post_init__(self) -> None:
        self.channel = grpc.insecure_channel(self.address)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self.responses: queue.Queue[p4r.StreamMessageResponse | Exception] = queue.Queue()
        self._stream = self.stub.StreamChannel(iter(self._requests.get, None))
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        try:
            for msg in self._stream:
                self.responses.put(msg)
        except grpc.RpcError as exc:
            self.responses.put(exc)

    def arbitrate(self, election_id: int | None = None, timeout: float = 5) -> p4r.StreamMessageResponse:
        """Send a MasterArbitrationUpdate and return the first reply."""
        if election_id is not None:
            self.election_id = election_id
        self._requests.put(arbitration_request(self.device_id, self.election_id))
        return self.next_stream_message(timeout)

    def next_stream_message(self, timeout: float = 5) -> p4r.StreamMessageResponse:
        msg = self.responses.get(timeout=timeout)
        if isinstance(msg, Exception):
            raise msg
        return msg

    def close(self) -> None:
        self._requests.put(None)
        self._stream.cancel()
        self.channel.close()

    def _eid(self, msg: p4r.WriteRequest | p4r.SetForwardingPipelineConfigRequest) -> None:
        set_election_id(msg.election_id, self.election_id)

    def set_pipeline(
        self,
        p4info: p4i.P4Info | None = None,
        action: int = p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        cookie: int = 1,
    ) -> None:
        req = p4r.SetForwardingPipelineConfigRequest(device_id=self.device_id, action=action)
        self._eid(req)
        req.config.p4info.CopyFrom(p4info if p4info is not None else self.index.p4info)
        req.config.cookie.cookie = cookie
        self.stub.SetForwardingPipelineConfig(req, timeout=10)

    def table_entry(
        self, table: str, match: dict[str, LooseMatch], action: str | None = None, **params: int
    ) -> p4r.TableEntry:
        """Build an entry by names: exact fields as ints, LPM fields as (value, prefix_len)."""
        return build_entry(self.index, table, match.items(), action, params.items())

    def write(self, *updates: tuple[int, p4r.TableEntry], timeout: float = 10) -> None:
        req = p4r.WriteRequest(device_id=self.device_id)
        self._eid(req)
        for kind, entry in updates:
            req.updates.add(type=kind).entity.table_entry.CopyFrom(entry)
        self.stub.Write(req, timeout=timeout)

    def insert(self, entry: p4r.TableEntry) -> None:
        self.write((p4r.Update.INSERT, entry))

    def modify(self, entry: p4r.TableEntry) -> None:
        self.write((p4r.Update.MODIFY, entry))

    def delete(self, entry: p4r.TableEntry) -> None:
        self.write((p4r.Update.DELETE, entry))

    def read(self, *entities: p4r.Entity) -> list[p4r.Entity]:
        req = p4r.ReadRequest(device_id=self.device_id, entities=list(entities))
        out: list[p4r.Entity] = []
        responses: Iterator[p4r.ReadResponse] = self.stub.Read(req, timeout=10)
        for resp in responses:
            out.extend(resp.entities)
        return out

    def read_table(self, table: str | None = None) -> list[p4r.TableEntry]:
        tid = 0 if table is None else self.index.table(table).id
        return [e.table_entry for e in self.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=tid)))]

    def read_counter(self, counter: str, index: int) -> tuple[int, int]:
        entity = p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=self.index.counter(counter).id))
        entity.counter_entry.index.index = index
        (got,) = self.read(entity)
        return got.counter_entry.data.packet_count, got.counter_entry.data.byte_count
