"""A small P4Runtime client for the BMv2 tests (finsy's protos; the encoding of mrc_p4rt).

It does what a PTF-style data-plane test needs and nothing more: win arbitration,
push the pipeline, write table entries by P4Info name, read counters and the
P4Info back. Names resolve through the committed P4Info (mrc_fabric.p4info), so
no numeric id appears in a test.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import grpc
from finsy.proto import p4i, p4r, p4r_grpc

from mrc_fabric.p4info import P4InfoIndex, default_index
from mrc_p4rt.codec import canonical_bytes

RPC_TIMEOUT = 10.0

MatchValue = int | tuple[int, int]  # exact value, or (value, prefix length) for LPM


@dataclass(frozen=True)
class CounterValue:
    packets: int
    bytes: int


class P4RuntimeClient:
    """One primary P4Runtime session to one device."""

    def __init__(
        self, address: str, device_id: int, election_id: int = 1, index: P4InfoIndex | None = None
    ) -> None:
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.index = index or default_index()
        self.channel = grpc.insecure_channel(address)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self._responses: queue.Queue[p4r.StreamMessageResponse | BaseException] = queue.Queue()
        self._stream = None
        self._reader: threading.Thread | None = None

    # -- session ---------------------------------------------------------------------
    def arbitrate(self, timeout: float = RPC_TIMEOUT) -> None:
        """Open the stream and become primary; raise if the device says otherwise."""
        self._stream = self.stub.StreamChannel(iter(self._requests.get, None))
        self._reader = threading.Thread(target=self._read_stream, name=f"p4rt-{self.address}", daemon=True)
        self._reader.start()
        req = p4r.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.low = self.election_id
        self._requests.put(req)
        while True:
            msg = self._responses.get(timeout=timeout)
            if isinstance(msg, BaseException):
                raise msg
            if msg.HasField("arbitration"):
                if msg.arbitration.status.code != grpc.StatusCode.OK.value[0]:
                    raise RuntimeError(f"not primary on {self.address}: {msg.arbitration.status.message}")
                return

    def _read_stream(self) -> None:
        try:
            for msg in self._stream:
                self._responses.put(msg)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self._responses.put(exc)

    def close(self) -> None:
        self._requests.put(None)
        if self._stream is not None:
            self._stream.cancel()
        if self._reader is not None:
            self._reader.join(timeout=5)
        self.channel.close()

    def __enter__(self) -> P4RuntimeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pipeline ----------------------------------------------------------------------
    def set_pipeline(self, p4info: p4i.P4Info, device_config: bytes) -> None:
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        )
        req.election_id.low = self.election_id
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        self.stub.SetForwardingPipelineConfig(req, timeout=RPC_TIMEOUT)

    def get_p4info(self) -> p4i.P4Info:
        req = p4r.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE
        )
        return self.stub.GetForwardingPipelineConfig(req, timeout=RPC_TIMEOUT).config.p4info

    # -- tables ------------------------------------------------------------------------
    def table_entry(
        self, table: str, match: Mapping[str, MatchValue], action: str, **params: int
    ) -> p4r.TableEntry:
        """Build an entry by names; the widths and kinds come from the P4Info."""
        t = self.index.table(table)
        msg = p4r.TableEntry(table_id=t.id)
        for name, value in match.items():
            mf = t.match_fields[name]
            fm = msg.match.add(field_id=mf.id)
            if mf.match_type == p4i.MatchField.LPM:
                addr, plen = value if isinstance(value, tuple) else (value, mf.bitwidth)
                host_bits = mf.bitwidth - plen
                fm.lpm.value = canonical_bytes((addr >> host_bits) << host_bits)
                fm.lpm.prefix_len = plen
            else:
                if isinstance(value, tuple):
                    raise ValueError(f"{table}.{name} is an exact match, got {value!r}")
                fm.exact.value = canonical_bytes(value)
        a = self.index.action(action)
        msg.action.action.action_id = a.id
        for name, value in params.items():
            pid, _width = a.params[name]
            msg.action.action.params.add(param_id=pid, value=canonical_bytes(value))
        return msg

    def _write(self, kind: int, entries: list[p4r.TableEntry]) -> None:
        req = p4r.WriteRequest(device_id=self.device_id)
        req.election_id.low = self.election_id
        for e in entries:
            upd = req.updates.add(type=kind)
            upd.entity.table_entry.CopyFrom(e)
        self.stub.Write(req, timeout=RPC_TIMEOUT)

    def insert(self, *entries: p4r.TableEntry) -> None:
        self._write(p4r.Update.INSERT, list(entries))

    def modify(self, *entries: p4r.TableEntry) -> None:
        self._write(p4r.Update.MODIFY, list(entries))

    def delete(self, *entries: p4r.TableEntry) -> None:
        self._write(p4r.Update.DELETE, list(entries))

    def set_default(self, table: str, action: str, **params: int) -> None:
        e = self.table_entry(table, {}, action, **params)
        e.is_default_action = True
        self.modify(e)

    def read_entries(self, table: str) -> list[p4r.TableEntry]:
        req = p4r.ReadRequest(device_id=self.device_id)
        req.entities.add().table_entry.table_id = self.index.table(table).id
        return [ent.table_entry for resp in self.stub.Read(req, timeout=RPC_TIMEOUT) for ent in resp.entities]

    # -- counters ----------------------------------------------------------------------
    def read_counter(self, counter: str, index: int) -> CounterValue:
        req = p4r.ReadRequest(device_id=self.device_id)
        ce = req.entities.add().counter_entry
        ce.counter_id = self.index.counter(counter).id
        ce.index.index = index
        for resp in self.stub.Read(req, timeout=RPC_TIMEOUT):
            for ent in resp.entities:
                d = ent.counter_entry.data
                return CounterValue(d.packet_count, d.byte_count)
        raise LookupError(f"{counter}[{index}] not returned by {self.address}")

    def read_counters(self, counter: str) -> Iterator[tuple[int, CounterValue]]:
        """Every cell of a counter (wildcard read)."""
        req = p4r.ReadRequest(device_id=self.device_id)
        req.entities.add().counter_entry.counter_id = self.index.counter(counter).id
        for resp in self.stub.Read(req, timeout=RPC_TIMEOUT):
            for ent in resp.entities:
                c = ent.counter_entry
                yield c.index.index, CounterValue(c.data.packet_count, c.data.byte_count)
