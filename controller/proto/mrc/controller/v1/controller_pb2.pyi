from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FaultKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAULT_KIND_UNSPECIFIED: _ClassVar[FaultKind]
    LINK_DOWN: _ClassVar[FaultKind]
    BLACKHOLE: _ClassVar[FaultKind]
    LOSS: _ClassVar[FaultKind]
    FLAP: _ClassVar[FaultKind]
    SWITCH_DOWN: _ClassVar[FaultKind]
    NIC_PORT_DOWN: _ClassVar[FaultKind]

class Direction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BOTH: _ClassVar[Direction]
    A_TO_B: _ClassVar[Direction]
    B_TO_A: _ClassVar[Direction]
FAULT_KIND_UNSPECIFIED: FaultKind
LINK_DOWN: FaultKind
BLACKHOLE: FaultKind
LOSS: FaultKind
FLAP: FaultKind
SWITCH_DOWN: FaultKind
NIC_PORT_DOWN: FaultKind
BOTH: Direction
A_TO_B: Direction
B_TO_A: Direction

class GetTopologyRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetTopologyResponse(_message.Message):
    __slots__ = ("topology_json",)
    TOPOLOGY_JSON_FIELD_NUMBER: _ClassVar[int]
    topology_json: str
    def __init__(self, topology_json: _Optional[str] = ...) -> None: ...

class InstallRoutesRequest(_message.Message):
    __slots__ = ("switches",)
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    switches: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, switches: _Optional[_Iterable[str]] = ...) -> None: ...

class SwitchInstall(_message.Message):
    __slots__ = ("switch", "entries")
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    switch: str
    entries: int
    def __init__(self, switch: _Optional[str] = ..., entries: _Optional[int] = ...) -> None: ...

class InstallRoutesResponse(_message.Message):
    __slots__ = ("switches", "total_entries", "host_config_dir")
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    HOST_CONFIG_DIR_FIELD_NUMBER: _ClassVar[int]
    switches: _containers.RepeatedCompositeFieldContainer[SwitchInstall]
    total_entries: int
    host_config_dir: str
    def __init__(self, switches: _Optional[_Iterable[_Union[SwitchInstall, _Mapping]]] = ..., total_entries: _Optional[int] = ..., host_config_dir: _Optional[str] = ...) -> None: ...

class FaultSpec(_message.Message):
    __slots__ = ("kind", "target", "direction", "probability", "period_s", "duration_s")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    PERIOD_S_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    kind: FaultKind
    target: str
    direction: Direction
    probability: float
    period_s: float
    duration_s: float
    def __init__(self, kind: _Optional[_Union[FaultKind, str]] = ..., target: _Optional[str] = ..., direction: _Optional[_Union[Direction, str]] = ..., probability: _Optional[float] = ..., period_s: _Optional[float] = ..., duration_s: _Optional[float] = ...) -> None: ...

class Fault(_message.Message):
    __slots__ = ("id", "spec", "created_at", "expires_at", "active", "entries")
    ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    id: str
    spec: FaultSpec
    created_at: float
    expires_at: float
    active: bool
    entries: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., spec: _Optional[_Union[FaultSpec, _Mapping]] = ..., created_at: _Optional[float] = ..., expires_at: _Optional[float] = ..., active: _Optional[bool] = ..., entries: _Optional[_Iterable[str]] = ...) -> None: ...

class InjectFaultRequest(_message.Message):
    __slots__ = ("spec",)
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: FaultSpec
    def __init__(self, spec: _Optional[_Union[FaultSpec, _Mapping]] = ...) -> None: ...

class ClearFaultRequest(_message.Message):
    __slots__ = ("id", "all")
    ID_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    id: str
    all: bool
    def __init__(self, id: _Optional[str] = ..., all: _Optional[bool] = ...) -> None: ...

class ClearFaultResponse(_message.Message):
    __slots__ = ("cleared",)
    CLEARED_FIELD_NUMBER: _ClassVar[int]
    cleared: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cleared: _Optional[_Iterable[str]] = ...) -> None: ...

class ListFaultsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListFaultsResponse(_message.Message):
    __slots__ = ("faults", "next_page_token")
    FAULTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    faults: _containers.RepeatedCompositeFieldContainer[Fault]
    next_page_token: str
    def __init__(self, faults: _Optional[_Iterable[_Union[Fault, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetCountersRequest(_message.Message):
    __slots__ = ("switches",)
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    switches: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, switches: _Optional[_Iterable[str]] = ...) -> None: ...

class CounterValue(_message.Message):
    __slots__ = ("switch", "counter", "index", "label", "packets", "bytes")
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    PACKETS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    switch: str
    counter: str
    index: int
    label: str
    packets: int
    bytes: int
    def __init__(self, switch: _Optional[str] = ..., counter: _Optional[str] = ..., index: _Optional[int] = ..., label: _Optional[str] = ..., packets: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class GetCountersResponse(_message.Message):
    __slots__ = ("counters", "errors")
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    counters: _containers.RepeatedCompositeFieldContainer[CounterValue]
    errors: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, counters: _Optional[_Iterable[_Union[CounterValue, _Mapping]]] = ..., errors: _Optional[_Iterable[str]] = ...) -> None: ...

class ListPathsRequest(_message.Message):
    __slots__ = ("src", "dst", "ecmp")
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    ECMP_FIELD_NUMBER: _ClassVar[int]
    src: str
    dst: str
    ecmp: bool
    def __init__(self, src: _Optional[str] = ..., dst: _Optional[str] = ..., ecmp: _Optional[bool] = ...) -> None: ...

class Hop(_message.Message):
    __slots__ = ("node", "in_port", "out_port", "dst", "note")
    NODE_FIELD_NUMBER: _ClassVar[int]
    IN_PORT_FIELD_NUMBER: _ClassVar[int]
    OUT_PORT_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    node: str
    in_port: int
    out_port: int
    dst: str
    note: str
    def __init__(self, node: _Optional[str] = ..., in_port: _Optional[int] = ..., out_port: _Optional[int] = ..., dst: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class Path(_message.Message):
    __slots__ = ("ev", "plane", "t1", "carrier", "hops", "status", "drop_reason", "drop_at", "survival", "delivered_to", "unreachable", "silent")
    EV_FIELD_NUMBER: _ClassVar[int]
    PLANE_FIELD_NUMBER: _ClassVar[int]
    T1_FIELD_NUMBER: _ClassVar[int]
    CARRIER_FIELD_NUMBER: _ClassVar[int]
    HOPS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DROP_REASON_FIELD_NUMBER: _ClassVar[int]
    DROP_AT_FIELD_NUMBER: _ClassVar[int]
    SURVIVAL_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_TO_FIELD_NUMBER: _ClassVar[int]
    UNREACHABLE_FIELD_NUMBER: _ClassVar[int]
    SILENT_FIELD_NUMBER: _ClassVar[int]
    ev: int
    plane: int
    t1: int
    carrier: str
    hops: _containers.RepeatedCompositeFieldContainer[Hop]
    status: str
    drop_reason: str
    drop_at: str
    survival: float
    delivered_to: str
    unreachable: _containers.RepeatedScalarFieldContainer[str]
    silent: str
    def __init__(self, ev: _Optional[int] = ..., plane: _Optional[int] = ..., t1: _Optional[int] = ..., carrier: _Optional[str] = ..., hops: _Optional[_Iterable[_Union[Hop, _Mapping]]] = ..., status: _Optional[str] = ..., drop_reason: _Optional[str] = ..., drop_at: _Optional[str] = ..., survival: _Optional[float] = ..., delivered_to: _Optional[str] = ..., unreachable: _Optional[_Iterable[str]] = ..., silent: _Optional[str] = ...) -> None: ...

class ListPathsResponse(_message.Message):
    __slots__ = ("paths",)
    PATHS_FIELD_NUMBER: _ClassVar[int]
    paths: _containers.RepeatedCompositeFieldContainer[Path]
    def __init__(self, paths: _Optional[_Iterable[_Union[Path, _Mapping]]] = ...) -> None: ...

class WatchEventsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Event(_message.Message):
    __slots__ = ("timestamp", "kind", "switch", "fault_id", "message")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    FAULT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    timestamp: float
    kind: str
    switch: str
    fault_id: str
    message: str
    def __init__(self, timestamp: _Optional[float] = ..., kind: _Optional[str] = ..., switch: _Optional[str] = ..., fault_id: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class GetHealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SwitchHealth(_message.Message):
    __slots__ = ("switch", "address", "reachable", "primary", "last_error", "reconciles", "pipeline_pushes", "dataplane", "dataplane_detail")
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REACHABLE_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    RECONCILES_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_PUSHES_FIELD_NUMBER: _ClassVar[int]
    DATAPLANE_FIELD_NUMBER: _ClassVar[int]
    DATAPLANE_DETAIL_FIELD_NUMBER: _ClassVar[int]
    switch: str
    address: str
    reachable: bool
    primary: bool
    last_error: str
    reconciles: int
    pipeline_pushes: int
    dataplane: str
    dataplane_detail: str
    def __init__(self, switch: _Optional[str] = ..., address: _Optional[str] = ..., reachable: _Optional[bool] = ..., primary: _Optional[bool] = ..., last_error: _Optional[str] = ..., reconciles: _Optional[int] = ..., pipeline_pushes: _Optional[int] = ..., dataplane: _Optional[str] = ..., dataplane_detail: _Optional[str] = ...) -> None: ...

class LinkHealth(_message.Message):
    __slots__ = ("link", "sender", "receiver", "state", "detail")
    LINK_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    link: str
    sender: str
    receiver: str
    state: str
    detail: str
    def __init__(self, link: _Optional[str] = ..., sender: _Optional[str] = ..., receiver: _Optional[str] = ..., state: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class AgentHealth(_message.Message):
    __slots__ = ("host", "socket", "state", "detail")
    HOST_FIELD_NUMBER: _ClassVar[int]
    SOCKET_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    host: str
    socket: str
    state: str
    detail: str
    def __init__(self, host: _Optional[str] = ..., socket: _Optional[str] = ..., state: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class GetHealthResponse(_message.Message):
    __slots__ = ("switches", "agents", "links")
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    switches: _containers.RepeatedCompositeFieldContainer[SwitchHealth]
    agents: _containers.RepeatedCompositeFieldContainer[AgentHealth]
    links: _containers.RepeatedCompositeFieldContainer[LinkHealth]
    def __init__(self, switches: _Optional[_Iterable[_Union[SwitchHealth, _Mapping]]] = ..., agents: _Optional[_Iterable[_Union[AgentHealth, _Mapping]]] = ..., links: _Optional[_Iterable[_Union[LinkHealth, _Mapping]]] = ...) -> None: ...
