"""The P4Runtime v1 gRPC service of one Linux SRv6 switch.

Requests are checked in the order the P4Runtime spec implies: device id,
pipeline present, primary client, then each update. A request-level refusal
(wrong device, not primary, unsupported atomicity) has its own code. A Write in
which any update fails ends, as P4Runtime §12.3 says, with the top-level code
UNKNOWN and one ``p4.v1.Error`` per update -- OK for those that went through --
packed in a ``google.rpc.Status`` sent in the ``grpc-status-details-bin``
trailer; the top-level message also says how many failed, which, and the first
failures, and the details stop where they would outgrow gRPC's trailer limit
(``write_status``). A Read's answer is bounded: repeated queries and entities collapse,
and more than ``max_read_entities`` is RESOURCE_EXHAUSTED (``read_bounds``). Reading a
table's default entry (``is_default_action``) returns it even if it was never modified.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

import grpc
from finsy.proto import p4i, p4r, p4r_grpc

from mrc_fabric.p4info import P4InfoError, P4InfoIndex

from .arbitration import Arbitration, ClientStream
from .counters import CounterReader
from .errors import P4RuntimeError, invalid
from .netlink_backend import KernelError
from .p4info_compare import p4info_difference
from .read_bounds import ReadAnswer, capacity, distinct_queries
from .switch_tables import SwitchTables
from .write_status import write_error_status

log = logging.getLogger(__name__)

P4RUNTIME_API_VERSION = "1.4.1"
_END = object()


def abort(context: grpc.ServicerContext, exc: P4RuntimeError) -> None:
    context.abort(exc.code, exc.message)


class P4RuntimeShim(p4r_grpc.P4RuntimeServicer):  # type: ignore[misc]
    def __init__(
        self,
        name: str,
        device_id: int,
        index: P4InfoIndex,
        tables: SwitchTables,
        counter_snapshot: Callable[[], CounterReader],
        max_read_entities: int | None = None,
    ) -> None:
        self.name = name
        self.max_read_entities = max_read_entities or capacity(index)  # entities in one Read's answer
        self.device_id = device_id
        self.index = index
        self.expected_p4info: p4i.P4Info = index.p4info
        self.tables = tables
        self.counter_snapshot = counter_snapshot
        self.arbitration = Arbitration(device_id)
        self.lock = threading.RLock()  # one write/read/pipeline change at a time
        self.config: p4r.ForwardingPipelineConfig | None = None
        self.saved: p4r.ForwardingPipelineConfig | None = None

    # -- helpers ------------------------------------------------------------------
    def _check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise P4RuntimeError(
                grpc.StatusCode.NOT_FOUND,
                f"device_id: {device_id} is not this switch (device_id {self.device_id})",
            )

    def _check_pipeline(self) -> None:
        if self.config is None:
            raise P4RuntimeError(
                grpc.StatusCode.FAILED_PRECONDITION,
                "no forwarding pipeline: call SetForwardingPipelineConfig first",
            )

    # -- StreamChannel -------------------------------------------------------------
    def StreamChannel(
        self, request_iterator: Iterator[p4r.StreamMessageRequest], context: grpc.ServicerContext
    ) -> Iterator[p4r.StreamMessageResponse]:
        stream = ClientStream()
        self.arbitration.open(stream)
        context.add_callback(lambda: stream.outbox.put(_END))

        def reader() -> None:
            try:
                for req in request_iterator:
                    kind = req.WhichOneof("update")
                    if kind == "arbitration":
                        try:
                            self.arbitration.request(stream, req.arbitration)
                        except P4RuntimeError as exc:
                            stream.outbox.put(exc)
                            return
                    else:
                        log.info("ignoring stream message %s (no packet I/O on the Linux target)", kind)
            except grpc.RpcError:
                pass
            except Exception:  # a broken client must not take the stream thread down silently
                log.exception("stream reader failed")
            finally:
                stream.outbox.put(_END)

        threading.Thread(target=reader, name=f"{self.name}/stream-{stream.ident}", daemon=True).start()
        try:
            while True:
                item = stream.outbox.get()
                if item is _END:
                    return
                if isinstance(item, P4RuntimeError):
                    abort(context, item)
                yield item
        finally:
            self.arbitration.close(stream)
            log.info("stream %d closed", stream.ident)

    # -- pipeline -------------------------------------------------------------------
    def SetForwardingPipelineConfig(
        self, request: p4r.SetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.SetForwardingPipelineConfigResponse:
        try:
            self._check_device(request.device_id)
            self.arbitration.check_primary(request.election_id, request.HasField("election_id"))
            action = request.action
            A = p4r.SetForwardingPipelineConfigRequest
            if action == A.UNSPECIFIED:
                raise invalid("action: UNSPECIFIED")
            if action == A.COMMIT:
                config = self.saved if self.saved is not None else self._verified(request)
            else:
                config = self._verified(request)
            with self.lock:
                if action == A.VERIFY_AND_SAVE:
                    self.saved = config
                elif action in (A.VERIFY_AND_COMMIT, A.COMMIT, A.RECONCILE_AND_COMMIT):
                    if action != A.RECONCILE_AND_COMMIT:
                        try:
                            self.tables.clear()
                        except KernelError as exc:
                            raise P4RuntimeError(
                                grpc.StatusCode.INTERNAL, f"could not remove the old entries: {exc}"
                            ) from exc
                    self.config = config
                    self.saved = None
                    log.info("pipeline committed (cookie %d)", config.cookie.cookie)
        except P4RuntimeError as exc:
            abort(context, exc)
        return p4r.SetForwardingPipelineConfigResponse()

    def _verified(self, request: p4r.SetForwardingPipelineConfigRequest) -> p4r.ForwardingPipelineConfig:
        if not request.HasField("config") or not request.config.HasField("p4info"):
            raise invalid("config.p4info: missing")
        diff = p4info_difference(self.expected_p4info, request.config.p4info)
        if diff is not None:
            raise invalid(f"config.{diff}")
        return request.config

    def GetForwardingPipelineConfig(
        self, request: p4r.GetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.GetForwardingPipelineConfigResponse:
        try:
            self._check_device(request.device_id)
        except P4RuntimeError as exc:
            abort(context, exc)
        out = p4r.GetForwardingPipelineConfigResponse()
        if self.config is None:
            return out
        R = p4r.GetForwardingPipelineConfigRequest
        rtype = request.response_type
        out.config.cookie.CopyFrom(self.config.cookie)
        if rtype in (R.ALL, R.P4INFO_AND_COOKIE):
            out.config.p4info.CopyFrom(self.config.p4info)
        if rtype in (R.ALL, R.DEVICE_CONFIG_AND_COOKIE):
            out.config.p4_device_config = self.config.p4_device_config
        return out

    def Capabilities(
        self, request: p4r.CapabilitiesRequest, context: grpc.ServicerContext
    ) -> p4r.CapabilitiesResponse:
        return p4r.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_API_VERSION)

    # -- Write ----------------------------------------------------------------------
    def Write(self, request: p4r.WriteRequest, context: grpc.ServicerContext) -> p4r.WriteResponse:
        try:
            self._check_device(request.device_id)
            with self.lock:
                self._check_pipeline()
            self.arbitration.check_primary(request.election_id, request.HasField("election_id"))
            if request.atomicity != p4r.WriteRequest.CONTINUE_ON_ERROR:
                raise P4RuntimeError(
                    grpc.StatusCode.UNIMPLEMENTED,
                    "atomicity: only CONTINUE_ON_ERROR is supported by the Linux target",
                )
        except P4RuntimeError as exc:
            abort(context, exc)
        errors: list[P4RuntimeError | None] = []
        with self.lock:
            for update in request.updates:
                errors.append(self._one_update(update))
        if not any(errors):
            return p4r.WriteResponse()
        # P4Runtime §12.3: UNKNOWN at top level, one p4.v1.Error per update (OK where it went through).
        status = write_error_status(errors)
        context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
        context.abort(grpc.StatusCode.UNKNOWN, status.message)
        raise AssertionError("unreachable")  # pragma: no cover

    def _one_update(self, update: p4r.Update) -> P4RuntimeError | None:
        try:
            kind = update.entity.WhichOneof("entity")
            if kind != "table_entry":
                raise P4RuntimeError(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"entity: {kind or 'nothing'}: the Linux target only writes table entries",
                )
            self.tables.apply(update.type, update.entity.table_entry)
        except P4RuntimeError as exc:
            log.info("write refused: %s", exc)
            return exc
        return None

    # -- Read -----------------------------------------------------------------------
    def Read(self, request: p4r.ReadRequest, context: grpc.ServicerContext) -> Iterator[p4r.ReadResponse]:
        try:
            self._check_device(request.device_id)
            with self.lock:
                self._check_pipeline()
                entities = self._read(request)
        except P4RuntimeError as exc:
            abort(context, exc)
        # Keep each response well under gRPC's 4 MiB default message size.
        for start in range(0, len(entities), 1000):
            yield p4r.ReadResponse(entities=entities[start : start + 1000])

    def _read(self, request: p4r.ReadRequest) -> list[p4r.Entity]:
        answer = ReadAnswer(self.max_read_entities)
        counters: CounterReader | None = None
        for entity in distinct_queries(request.entities, self.max_read_entities):
            kind = entity.WhichOneof("entity")
            if kind == "table_entry":
                for key, e in self.tables.read_keyed(entity.table_entry):
                    answer.add(("table", *key), p4r.Entity(table_entry=e))
            elif kind == "counter_entry":
                query = entity.counter_entry
                if query.counter_id == 0:
                    infos = list(self.index.counters.values())
                else:
                    try:
                        infos = [self.index.counter(query.counter_id)]
                    except P4InfoError as exc:
                        raise invalid(f"counter_id: {exc}") from exc
                index = query.index.index if query.HasField("index") else None
                if counters is None:
                    counters = self.counter_snapshot()
                for info in infos:
                    if index is not None and not 0 <= index < info.size:
                        raise P4RuntimeError(
                            grpc.StatusCode.OUT_OF_RANGE,
                            f"index: {index} outside counter {info.alias} (size {info.size})",
                        )
                    for e in counters.entries(info, index):
                        answer.add(("counter", info.id, e.index.index), p4r.Entity(counter_entry=e))
            else:
                raise P4RuntimeError(
                    grpc.StatusCode.UNIMPLEMENTED,
                    f"entity: reading {kind or 'nothing'} is not supported by the Linux target",
                )
        return answer.entities
