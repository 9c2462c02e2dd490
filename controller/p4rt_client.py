"""P4Runtime client: one persistent session per switch, kept in sync with a desired entry set.

Each :class:`SwitchSession` owns a thread that connects to its switch, opens the
StreamChannel, wins arbitration with the controller's election id, pushes the
pipeline (P4Info, plus the BMv2 JSON for ``bmv2`` targets), reads back what the
switch holds and writes the difference to the desired entries. When the stream
drops (the switch restarted or went away) the thread reconnects with backoff and
does all of it again, so a restarted switch gets its pipeline and every entry back
without anyone asking; each step is reported as an event.

The desired entries belong to the caller (the controller core): ``sync`` writes the
difference between them and what the switch is known to hold. Every P4Runtime error
is raised as :class:`WriteError`/:class:`SwitchError` naming the switch, and for a
failed update its table and entry (decoded from the per-update ``p4.v1.Error``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import grpc
from finsy.proto import p4i, p4r, p4r_grpc, rpc_code, rpc_status

from controller.entries import Exact, Lpm, TableEntry
from mrc_fabric.p4info import P4InfoIndex

log = logging.getLogger(__name__)

WRITE_BATCH = 256
CONNECT_TIMEOUT_S = 2.0
RPC_TIMEOUT_S = 10.0
BACKOFF_MIN_S = 0.2
BACKOFF_MAX_S = 2.0

EventSink = Callable[[str, str, str], None]  # (kind, switch, message)


class SwitchError(Exception):
    """A P4Runtime operation on one switch failed; the message starts with the switch name."""

    def __init__(self, switch: str, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(f"{switch}: {message}")
        self.switch = switch
        self.code = code


class SwitchUnavailable(SwitchError):
    """The switch has no live P4Runtime session (not reachable, or not primary yet)."""


@dataclass(frozen=True)
class UpdateError:
    op: str  # INSERT, MODIFY, DELETE
    entry: TableEntry
    code: str  # gRPC canonical code name
    message: str

    def __str__(self) -> str:
        return f"{self.op} {self.entry.describe()}: {self.code}: {self.message}"


class WriteError(SwitchError):
    def __init__(self, switch: str, errors: list[UpdateError], summary: str = "") -> None:
        self.errors = errors
        shown = "; ".join(str(e) for e in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        super().__init__(switch, f"write failed: {shown or summary}{more}")


@dataclass(frozen=True)
class Pipeline:
    p4info: p4i.P4Info
    device_config: bytes = b""  # BMv2 JSON; empty for the Linux shim


# -- codec: TableEntry <-> p4.v1.TableEntry ---------------------------------------------------------
def _bytes(value: int) -> bytes:
    """Canonical (shortest) byte string, P4Runtime ≥ 1.3."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def encode_entry(index: P4InfoIndex, entry: TableEntry) -> p4r.TableEntry:
    table = index.table(entry.table)
    msg = p4r.TableEntry(table_id=table.id, priority=entry.priority)
    for name, value in entry.match:
        mf = table.match_fields[name]
        fm = msg.match.add(field_id=mf.id)
        if isinstance(value, Lpm):
            fm.lpm.value = _bytes(value.value)
            fm.lpm.prefix_len = value.prefix_len
        else:
            fm.exact.value = _bytes(value.value)
    action = index.action(entry.action)
    msg.action.action.action_id = action.id
    for name, value in entry.params:
        pid, _width = action.params[name]
        msg.action.action.params.add(param_id=pid, value=_bytes(value))
    return msg


def decode_entry(index: P4InfoIndex, msg: p4r.TableEntry) -> TableEntry:
    table = index.table(msg.table_id)
    match = []
    for fm in msg.match:
        mf = table.field_by_id(fm.field_id)
        kind = fm.WhichOneof("field_match_type")
        if kind == "lpm":
            match.append((mf.name, Lpm(int.from_bytes(fm.lpm.value, "big"), fm.lpm.prefix_len)))
        elif kind == "exact":
            match.append((mf.name, Exact(int.from_bytes(fm.exact.value, "big"))))
        else:
            raise ValueError(f"table {table.alias}: match kind {kind} is not used by this program")
    order = list(table.match_fields)
    match.sort(key=lambda m: order.index(m[0]))
    action = index.action(msg.action.action.action_id)
    params = sorted(
        (
            (action.param_by_id(p.param_id)[0], int.from_bytes(p.value, "big"))
            for p in msg.action.action.params
        ),
        key=lambda p: action.params[p[0]][0],
    )
    return TableEntry(table.alias, tuple(match), action.alias, tuple(params), msg.priority)


def decode_update_errors(exc: grpc.RpcError) -> list[tuple[int, str, str]]:
    """Per-update (index, code name, message) of a failed Write; OK updates are left out."""
    out = []
    for key, value in exc.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        status = rpc_status.Status.FromString(value)
        for i, detail in enumerate(status.details):
            err = p4r.Error()
            if not detail.Unpack(err):
                continue
            if err.canonical_code != rpc_code.OK:
                out.append((i, rpc_code.Code.Name(err.canonical_code), err.message))
    return out


# -- one switch ---------------------------------------------------------------------------------------
@dataclass
class SwitchSession:
    """A persistent P4Runtime session to one switch (see the module doc)."""

    name: str
    address: str
    device_id: int
    pipeline: Pipeline
    index: P4InfoIndex
    desired: Callable[[], Iterable[TableEntry]]  # what the switch should hold; replayed on (re)connect
    on_event: EventSink = lambda kind, switch, message: None
    election_id: int = 1

    installed: dict[tuple, TableEntry] = field(default_factory=dict)
    connects: int = 0  # how many times the pipeline was pushed (1 = first connect)
    last_error: str = ""

    def __post_init__(self) -> None:
        self._lock = threading.RLock()  # one writer at a time (replay vs API calls)
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._channel: grpc.Channel | None = None
        self._stub: p4r_grpc.P4RuntimeStub | None = None
        self._stream = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"p4rt-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.cancel()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def wait_ready(self, timeout: float) -> bool:
        return self._ready.wait(timeout)

    def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        while not self._stop.is_set():
            try:
                self._session()
                backoff = BACKOFF_MIN_S
            except Exception as exc:  # any failure ends this session; the loop reconnects
                msg = _describe(exc)
                if msg != self.last_error:
                    log.info("%s: session ended: %s", self.name, msg)
                self.last_error = msg
            finally:
                was_ready = self._ready.is_set()
                self._ready.clear()
                if self._channel is not None:
                    self._channel.close()
                self._channel = self._stub = self._stream = None
                if was_ready and not self._stop.is_set():
                    self.on_event("switch_disconnected", self.name, self.last_error or "stream closed")
            if self._stop.wait(backoff):
                break
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _session(self) -> None:
        channel = grpc.insecure_channel(self.address)
        self._channel = channel
        grpc.channel_ready_future(channel).result(timeout=CONNECT_TIMEOUT_S)
        stub = p4r_grpc.P4RuntimeStub(channel)
        self._stub = stub
        requests: queue.Queue = queue.Queue()
        arbitration = p4r.StreamMessageRequest()
        arbitration.arbitration.device_id = self.device_id
        arbitration.arbitration.election_id.low = self.election_id
        requests.put(arbitration)
        stream = stub.StreamChannel(iter(requests.get, None))
        self._stream = stream
        try:
            first = next(stream)
            if not first.HasField("arbitration"):
                raise SwitchError(
                    self.name, f"expected an arbitration reply, got {first.WhichOneof('update')}"
                )
            if first.arbitration.status.code != rpc_code.OK:
                raise SwitchError(
                    self.name,
                    f"not primary for device {self.device_id}: {first.arbitration.status.message}",
                )
            with self._lock:
                self._push_pipeline()
                self.installed = {e.key: e for e in self._read_entries()}
                self._sync_locked(list(self.desired()))
                self.connects += 1
                self._ready.set()
            self.last_error = ""
            kind = "switch_connected" if self.connects == 1 else "switch_reinstalled"
            self.on_event(kind, self.name, f"pipeline and {len(self.installed)} entries installed")
            for msg in stream:  # blocks until the switch or we close the stream
                if msg.HasField("arbitration") and msg.arbitration.status.code != rpc_code.OK:
                    self._ready.clear()
                    raise SwitchError(self.name, "lost primary arbitration")
                if msg.HasField("error"):
                    log.warning("%s: stream error: %s", self.name, msg.error.message)
            raise SwitchError(self.name, "stream closed by the switch")
        finally:
            requests.put(None)

    # -- P4Runtime operations --------------------------------------------------------------------
    def _require_stub(self) -> p4r_grpc.P4RuntimeStub:
        stub = self._stub
        if stub is None:
            raise SwitchUnavailable(
                self.name,
                f"not connected to {self.address}" + (f" ({self.last_error})" if self.last_error else ""),
                grpc.StatusCode.UNAVAILABLE,
            )
        return stub

    def _push_pipeline(self) -> None:
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
        req.election_id.low = self.election_id
        req.config.p4info.CopyFrom(self.pipeline.p4info)
        req.config.p4_device_config = self.pipeline.device_config
        try:
            self._require_stub().SetForwardingPipelineConfig(req, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise SwitchError(
                self.name, f"pipeline push failed: {exc.code().name}: {exc.details()}", exc.code()
            ) from exc

    def _read_entries(self, table: str | None = None) -> list[TableEntry]:
        req = p4r.ReadRequest(device_id=self.device_id)
        entity = req.entities.add()
        entity.table_entry.table_id = self.index.table(table).id if table else 0
        out = []
        try:
            for resp in self._require_stub().Read(req, timeout=RPC_TIMEOUT_S):
                for ent in resp.entities:
                    if ent.HasField("table_entry") and not ent.table_entry.is_default_action:
                        out.append(decode_entry(self.index, ent.table_entry))
        except grpc.RpcError as exc:
            raise SwitchError(
                self.name, f"read failed: {exc.code().name}: {exc.details()}", exc.code()
            ) from exc
        return out

    def read_entries(self, table: str | None = None) -> list[TableEntry]:
        """Every entry the switch holds (optionally of one table), read over P4Runtime."""
        return self._read_entries(table)

    def read_counter(self, counter: str) -> list[tuple[int, int, int]]:
        """(index, packets, bytes) of every cell of a counter."""
        info = self.index.counter(counter)
        req = p4r.ReadRequest(device_id=self.device_id)
        req.entities.add().counter_entry.counter_id = info.id
        out = []
        try:
            for resp in self._require_stub().Read(req, timeout=RPC_TIMEOUT_S):
                for ent in resp.entities:
                    c = ent.counter_entry
                    out.append((c.index.index, c.data.packet_count, c.data.byte_count))
        except grpc.RpcError as exc:
            raise SwitchError(
                self.name, f"read of counter {counter} failed: {exc.code().name}: {exc.details()}", exc.code()
            ) from exc
        return sorted(out)

    def _write(self, op: int, entries: Sequence[TableEntry]) -> list[UpdateError]:
        """Write in batches; returns the per-update failures (the rest went through)."""
        stub = self._require_stub()
        failures: list[UpdateError] = []
        op_name = p4r.Update.Type.Name(op)
        for start in range(0, len(entries), WRITE_BATCH):
            batch = entries[start : start + WRITE_BATCH]
            req = p4r.WriteRequest(device_id=self.device_id)
            req.election_id.low = self.election_id
            for e in batch:
                upd = req.updates.add(type=op)
                upd.entity.table_entry.CopyFrom(encode_entry(self.index, e))
            try:
                stub.Write(req, timeout=RPC_TIMEOUT_S)
            except grpc.RpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                    raise SwitchUnavailable(self.name, f"write failed: {exc.details()}", exc.code()) from exc
                per_update = decode_update_errors(exc)
                if not per_update:  # the whole batch was refused with one status
                    failures.extend(
                        UpdateError(op_name, e, exc.code().name, exc.details() or "") for e in batch
                    )
                for i, code, message in per_update:
                    if i < len(batch):
                        failures.append(UpdateError(op_name, batch[i], code, message))
        return failures

    def sync(self, desired: Iterable[TableEntry] | None = None) -> int:
        """Make the switch hold exactly ``desired`` (default: the ``desired()`` callback, read
        under the session lock so concurrent syncs cannot reorder); returns the updates written."""
        with self._lock:  # a replay in progress holds the lock and sets ready before releasing it
            if not self._ready.is_set():
                raise SwitchUnavailable(
                    self.name,
                    f"no P4Runtime session to {self.address}"
                    + (f" ({self.last_error})" if self.last_error else ""),
                    grpc.StatusCode.UNAVAILABLE,
                )
            return self._sync_locked(list(self.desired() if desired is None else desired))

    def _sync_locked(self, desired: list[TableEntry]) -> int:
        want = {e.key: e for e in desired}
        inserts = [e for k, e in want.items() if k not in self.installed]
        modifies = [e for k, e in want.items() if k in self.installed and self.installed[k] != e]
        deletes = [e for k, e in self.installed.items() if k not in want]
        failures: list[UpdateError] = []
        for op, batch in (
            (p4r.Update.DELETE, deletes),
            (p4r.Update.MODIFY, modifies),
            (p4r.Update.INSERT, inserts),
        ):
            if not batch:
                continue
            errs = self._write(op, batch)
            # An INSERT of an entry the switch already has (we lost track): overwrite it.
            retry = [e.entry for e in errs if op == p4r.Update.INSERT and e.code == "ALREADY_EXISTS"]
            errs = [e for e in errs if e.entry not in retry]
            if retry:
                errs.extend(self._write(p4r.Update.MODIFY, retry))
            failed = {e.entry.key for e in errs}
            for e in batch:
                if e.key in failed:
                    continue
                if op == p4r.Update.DELETE:
                    self.installed.pop(e.key, None)
                else:
                    self.installed[e.key] = e
            failures.extend(errs)
        if failures:
            raise WriteError(self.name, failures)
        return len(inserts) + len(modifies) + len(deletes)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.FutureTimeoutError):
        return "switch did not answer (connect timeout)"
    if isinstance(exc, grpc.RpcError):
        return f"{exc.code().name}: {exc.details()}"
    return str(exc) or type(exc).__name__


class SwitchPool:
    """Sessions to every switch, started together (one thread each)."""

    def __init__(self, sessions: Iterable[SwitchSession]) -> None:
        self.sessions = {s.name: s for s in sessions}

    def start(self) -> None:
        for s in self.sessions.values():
            s.start()

    def stop(self) -> None:
        for s in self.sessions.values():
            s._stop.set()
        for s in self.sessions.values():
            s.stop()

    def wait_ready(self, timeout: float) -> list[str]:
        """Names of the switches still not ready after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        for s in self.sessions.values():
            s.wait_ready(max(0.0, deadline - time.monotonic()))
        return [n for n, s in self.sessions.items() if not s.ready]

    def __getitem__(self, name: str) -> SwitchSession:
        return self.sessions[name]
