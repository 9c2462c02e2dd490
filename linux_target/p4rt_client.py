"""A minimal synchronous P4Runtime client for readiness checks, tests and debugging.

The controller has its own client; this one exists so the shim can be checked
without it: wait until a shim answers, arbitrate, push the pipeline, write and
read entries by P4Info names.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import grpc
from finsy.proto import p4r, p4r_grpc, rpc_status

from mrc_fabric.p4info import P4InfoIndex, default_index

from .table_codec import canonical_bytes


def wait_until_serving(address: str, timeout: float, alive: Callable[[], bool] | None = None) -> None:
    """Block until a P4Runtime server answers Capabilities at ``address``.

    Raises TimeoutError after ``timeout`` seconds, RuntimeError as soon as
    ``alive()`` says the server process is gone.
    """
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            raise RuntimeError(f"the server for {address} exited before answering")
        with grpc.insecure_channel(address) as channel:
            try:
                grpc.channel_ready_future(channel).result(
                    timeout=max(0.05, min(1.0, deadline - time.monotonic()))
                )
                p4r_grpc.P4RuntimeStub(channel).Capabilities(p4r.CapabilitiesRequest(), timeout=2)
                return
            except (grpc.FutureTimeoutError, grpc.RpcError) as exc:
                last = exc
        time.sleep(0.05)  # back off between connection attempts (the deadline bounds the wait)
    raise TimeoutError(f"no P4Runtime server at {address} after {timeout:.1f}s: {last}")


def write_errors(exc: grpc.RpcError) -> list[p4r.Error]:
    """The per-update p4.v1.Error list carried in a failed Write's trailers."""
    for key, value in exc.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == "grpc-status-details-bin":
            status = rpc_status.Status.FromString(value)
            out = []
            for detail in status.details:
                err = p4r.Error()
                detail.Unpack(err)
                out.append(err)
            return out
    return []


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
        self._requests: queue.Queue = queue.Queue()
        self.responses: queue.Queue = queue.Queue()
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
        req = p4r.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = self.election_id >> 64
        req.arbitration.election_id.low = self.election_id & ((1 << 64) - 1)
        self._requests.put(req)
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
        msg.election_id.high = self.election_id >> 64
        msg.election_id.low = self.election_id & ((1 << 64) - 1)

    def set_pipeline(
        self, p4info=None, action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
    ) -> None:
        req = p4r.SetForwardingPipelineConfigRequest(device_id=self.device_id, action=action)
        self._eid(req)
        req.config.p4info.CopyFrom(p4info if p4info is not None else self.index.p4info)
        req.config.cookie.cookie = 1
        self.stub.SetForwardingPipelineConfig(req, timeout=10)

    def table_entry(
        self, table: str, match: dict[str, int | tuple[int, int]], action: str | None = None, **params: int
    ) -> p4r.TableEntry:
        """Build an entry by names: exact fields as ints, LPM fields as (value, prefix_len)."""
        info = self.index.table(table)
        entry = p4r.TableEntry(table_id=info.id)
        for name, value in match.items():
            mf = info.match_fields[name]
            fm = entry.match.add(field_id=mf.id)
            if isinstance(value, tuple):
                fm.lpm.value = canonical_bytes(value[0])
                fm.lpm.prefix_len = value[1]
            else:
                fm.exact.value = canonical_bytes(value)
        if action is not None:
            ainfo = self.index.action(action)
            entry.action.action.action_id = ainfo.id
            for name, value in params.items():
                entry.action.action.params.add(param_id=ainfo.params[name][0], value=canonical_bytes(value))
        return entry

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
