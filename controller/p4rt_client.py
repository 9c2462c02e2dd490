"""P4Runtime client: one persistent session per switch, kept in sync with a desired entry set.

Each :class:`SwitchSession` owns a thread that connects to its switch, opens the
StreamChannel and arbitrates with the controller's election id. Whenever it is (or
becomes again) the primary it *reconciles* instead of starting over: it reads the
cookie of the pipeline the switch runs and pushes the pipeline (P4Info, plus the BMv2
JSON for ``bmv2`` targets) only when the cookie differs -- a push with
VERIFY_AND_COMMIT empties every table -- then reads back what the switch holds and
writes only the difference to the desired entries (insert what is missing, modify
what differs, delete what is extra). While another client is primary the session
stays on the stream as a backup and waits to be promoted. When the stream drops (the
switch restarted or went away) the thread reconnects with backoff and reconciles
again, so a restarted switch gets its pipeline and every entry back without anyone
asking; each step is reported as an event.

The desired entries belong to the caller (the controller core): ``sync`` writes the
difference between them and what the switch is known to hold. Every P4Runtime error
is raised as :class:`WriteError`/:class:`SwitchError` (the shared
:class:`mrc_p4rt.status.P4RuntimeCallError`) naming the switch, and for a failed
update its table and entry (decoded from the per-update ``p4.v1.Error``).
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from finsy.proto import p4i, p4r, p4r_grpc, rpc_code

from mrc_fabric.p4info import P4InfoIndex
from mrc_fabric.time_scale import scaled
from mrc_p4rt.channel import CONTROLLER_ELECTION_ID, arbitration_request, set_election_id, wait_for_p4runtime
from mrc_p4rt.codec import decode_entry, encode_entry
from mrc_p4rt.entries import MatchValue, TableEntry
from mrc_p4rt.status import P4RuntimeCallError

log = logging.getLogger(__name__)

WRITE_BATCH = 256
CONNECT_TIMEOUT_S = 2.0
RPC_TIMEOUT_S = 10.0  # on the reference machine; times mrc_fabric.time_scale here
BACKOFF_MIN_S = 0.2
BACKOFF_MAX_S = 2.0

EventSink = Callable[[str, str, str], None]  # (kind, switch, message)
EntryKey = tuple[str, tuple[tuple[str, MatchValue], ...], int]


def _no_event(kind: str, switch: str, message: str) -> None:
    pass


class SwitchError(P4RuntimeCallError):
    """A P4Runtime operation on one switch failed; the message starts with the switch name."""

    @property
    def switch(self) -> str:
        return self.target


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

    @property
    def cookie(self) -> int:
        """A fingerprint of this pipeline, stored on the switch with it (never 0: 0 is "none")."""
        digest = hashlib.sha256(self.p4info.SerializeToString(deterministic=True))
        digest.update(self.device_config)
        return int.from_bytes(digest.digest()[:8], "big") or 1


@dataclass(frozen=True)
class EntryDiff:
    """What to write so a switch holding ``installed`` holds ``desired`` instead."""

    inserts: list[TableEntry]
    modifies: list[TableEntry]
    deletes: list[TableEntry]

    @property
    def size(self) -> int:
        return len(self.inserts) + len(self.modifies) + len(self.deletes)


def diff_entries(installed: dict[EntryKey, TableEntry], desired: Iterable[TableEntry]) -> EntryDiff:
    """Insert what is missing, modify what differs, delete what is extra; nothing else."""
    want = {e.key: e for e in desired}
    return EntryDiff(
        inserts=[e for k, e in want.items() if k not in installed],
        modifies=[e for k, e in want.items() if k in installed and installed[k] != e],
        deletes=[e for k, e in installed.items() if k not in want],
    )


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
    on_event: EventSink = field(default=_no_event)
    election_id: int = CONTROLLER_ELECTION_ID
    # called with what the switch holds at each reconcile, before the desired state is read
    # (the core adopts the tables of a switch its state file could not tell it about)
    on_read: Callable[[list[TableEntry]], None] | None = None
    # ids of the tables this session owns (None: every table). A user's program may hold
    # tables of its own (mrc-testbed --p4): their entries are never read, diffed or deleted
    owned_tables: frozenset[int] | None = None

    installed: dict[EntryKey, TableEntry] = field(default_factory=dict)
    connects: int = 0  # how many times this session became primary and reconciled (1 = first)
    pipeline_pushes: int = 0  # how many of those had to push the pipeline (which empties the tables)
    last_error: str = ""
    reachable: bool = False  # the StreamChannel is open (primary or backup)

    def __post_init__(self) -> None:
        self._lock = threading.RLock()  # one writer at a time (replay vs API calls)
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._channel: grpc.Channel | None = None
        self._stub: p4r_grpc.P4RuntimeStub | None = None
        self._stream: Any = None

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
                was_reachable = self.reachable
                self.reachable = False
                self._ready.clear()
                if self._channel is not None:
                    self._channel.close()
                self._channel = self._stub = self._stream = None
                if was_reachable and not self._stop.is_set():
                    self.on_event("switch_disconnected", self.name, self.last_error or "stream closed")
            if self._stop.wait(backoff):
                break
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _session(self) -> None:
        channel = grpc.insecure_channel(self.address)
        self._channel = channel
        wait_for_p4runtime(channel, CONNECT_TIMEOUT_S)
        stub = p4r_grpc.P4RuntimeStub(channel)
        self._stub = stub
        requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        requests.put(arbitration_request(self.device_id, self.election_id))
        stream = stub.StreamChannel(iter(requests.get, None))
        self._stream = stream
        try:
            first = next(stream)
            if not first.HasField("arbitration"):
                raise SwitchError(
                    self.name, f"expected an arbitration reply, got {first.WhichOneof('update')}"
                )
            self.reachable = True
            self._on_arbitration(first.arbitration)
            for msg in stream:  # blocks until the switch or we close the stream
                if msg.HasField("arbitration"):
                    self._on_arbitration(msg.arbitration)
                elif msg.HasField("error"):
                    log.warning("%s: stream error: %s", self.name, msg.error.message)
            raise SwitchError(self.name, "stream closed by the switch", grpc.StatusCode.UNAVAILABLE)
        finally:
            requests.put(None)

    def _on_arbitration(self, update: p4r.MasterArbitrationUpdate) -> None:
        """Primary: reconcile the switch with the desired state. Backup: wait, keep the stream."""
        if update.status.code != rpc_code.OK:
            was_primary = self._ready.is_set()
            with self._lock:
                self._ready.clear()
            self.last_error = f"not primary for device {self.device_id}: {update.status.message}"
            if was_primary or self.connects == 0:
                self.on_event("switch_backup", self.name, self.last_error)
            return
        if self._ready.is_set():
            return  # already primary (a repeated notification)
        with self._lock:
            pushed, written = self._reconcile()
            self.connects += 1
            self._ready.set()
        self.last_error = ""
        kind = "switch_connected" if self.connects == 1 else "switch_reconciled"
        pipeline = "pipeline pushed" if pushed else "pipeline kept"
        self.on_event(kind, self.name, f"{pipeline}; {written} updates; {len(self.installed)} entries")

    def _reconcile(self) -> tuple[bool, int]:
        """Make the switch match: the pipeline only if its cookie differs (a push empties every
        table), then read what it holds and write only the difference. (pushed, updates)."""
        pushed = False
        if self._device_cookie() != self.pipeline.cookie:
            self._push_pipeline()
            pushed = True
        held = self._read_entries()
        self.installed = {e.key: e for e in held}
        if self.on_read is not None:
            self.on_read(held)
        written = self._sync_locked(list(self.desired()))
        return pushed, written

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

    def _device_cookie(self) -> int:
        """The cookie of the pipeline the switch runs; 0 when it has none."""
        req = p4r.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY
        )
        try:
            resp = self._require_stub().GetForwardingPipelineConfig(req, timeout=scaled(RPC_TIMEOUT_S))
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:  # no pipeline yet (BMv2)
                return 0
            raise SwitchError.from_rpc_error(self.name, "pipeline read", exc) from exc
        return int(resp.config.cookie.cookie)

    def _push_pipeline(self) -> None:
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
        )
        set_election_id(req.election_id, self.election_id)
        req.config.p4info.CopyFrom(self.pipeline.p4info)
        req.config.p4_device_config = self.pipeline.device_config
        req.config.cookie.cookie = self.pipeline.cookie
        try:
            self._require_stub().SetForwardingPipelineConfig(req, timeout=scaled(RPC_TIMEOUT_S))
        except grpc.RpcError as exc:
            raise SwitchError.from_rpc_error(self.name, "pipeline push", exc) from exc
        self.pipeline_pushes += 1

    def _read_entries(self, table: str | None = None) -> list[TableEntry]:
        req = p4r.ReadRequest(device_id=self.device_id)
        # one entity per owned table, never a wildcard: BMv2 answers a read of a table whose entries
        # came over Thrift (a user's own, simple_switch_CLI) with INTERNAL "out-of-sync"
        ids = [self.index.table(table).id] if table else sorted(self.owned_tables or [0])
        for table_id in ids:
            req.entities.add().table_entry.table_id = table_id
        out = []
        try:
            for resp in self._require_stub().Read(req, timeout=scaled(RPC_TIMEOUT_S)):
                for ent in resp.entities:
                    if ent.HasField("table_entry") and self._owned(ent.table_entry):
                        out.append(decode_entry(self.index, ent.table_entry))
        except grpc.RpcError as exc:
            raise SwitchError.from_rpc_error(self.name, "read", exc) from exc
        return out

    def _owned(self, entry: p4r.TableEntry) -> bool:
        """An entry of a table this session owns, not a default one."""
        owned = self.owned_tables
        return not entry.is_default_action and (owned is None or entry.table_id in owned)

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
            for resp in self._require_stub().Read(req, timeout=scaled(RPC_TIMEOUT_S)):
                for ent in resp.entities:
                    c = ent.counter_entry
                    out.append((c.index.index, c.data.packet_count, c.data.byte_count))
        except grpc.RpcError as exc:
            raise SwitchError.from_rpc_error(self.name, f"read of counter {counter}", exc) from exc
        return sorted(out)

    def _write(self, op: int, entries: Sequence[TableEntry]) -> list[UpdateError]:
        """Write in batches; returns the per-update failures (the rest went through)."""
        stub = self._require_stub()
        failures: list[UpdateError] = []
        op_name = p4r.Update.Type.Name(op)
        for start in range(0, len(entries), WRITE_BATCH):
            batch = entries[start : start + WRITE_BATCH]
            req = p4r.WriteRequest(device_id=self.device_id)
            set_election_id(req.election_id, self.election_id)
            for e in batch:
                upd = req.updates.add(type=op)
                upd.entity.table_entry.CopyFrom(encode_entry(self.index, e))
            try:
                stub.Write(req, timeout=scaled(RPC_TIMEOUT_S))
            except grpc.RpcError as exc:
                err = SwitchError.from_rpc_error(self.name, "write", exc)
                if err.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                    raise SwitchUnavailable(self.name, str(err), err.code) from exc
                if not err.failures:  # the whole batch was refused with one status
                    failures.extend(
                        UpdateError(op_name, e, exc.code().name, exc.details() or "") for e in batch
                    )
                for f in err.failures:
                    if f.index < len(batch):
                        failures.append(UpdateError(op_name, batch[f.index], f.code.name, f.message))
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
        diff = diff_entries(self.installed, desired)
        failures: list[UpdateError] = []
        for op, batch in (
            (p4r.Update.DELETE, diff.deletes),
            (p4r.Update.MODIFY, diff.modifies),
            (p4r.Update.INSERT, diff.inserts),
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
        return diff.size


def _describe(exc: BaseException) -> str:
    if isinstance(exc, grpc.RpcError) and exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
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
