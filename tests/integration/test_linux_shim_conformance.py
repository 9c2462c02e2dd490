"""P4Runtime conformance of the Linux shim, with a real gRPC client against a real shim.

The shim programs the kernel, so it runs as root in a namespace these tests
create (``ls-cf``); nothing is faked.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r, rpc_code
from linux_lab import NetnsLab, leftovers, run

from linux_target.egress import QUEUE_CELL_BYTES
from linux_target.p4rt_client import P4RuntimeTestClient
from mrc_fabric.addressing import t0_usid, top48, usid_prefix
from mrc_fabric.p4info import default_index, load_p4info
from mrc_fabric.time_scale import scaled
from mrc_p4rt.status import update_statuses

pytestmark = pytest.mark.root

NS = "ls-cf"
PORTS = {1: "ls-cf-p1", 2: "ls-cf-p2"}
DEVICE_ID = 3
MAC_A = 0x020000AA0001
MAC_B = 0x020000AA0002
ROUTE = usid_prefix(0x8000)  # fcbb:bb00:8000::/48
ROUTE_KEY = (int(ROUTE.network_address), 48)


@pytest.fixture(scope="session", autouse=True)
def no_ls_leftovers() -> Iterator[None]:
    """Nothing named ls... may survive the session, pass or fail."""
    yield
    assert leftovers("ls") == []


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsLab]:
    with NetnsLab(tmp_path_factory.mktemp("ls-cf")) as lab:
        lab.switch_ns(NS, PORTS, "ls-cf-q")
        yield lab


@pytest.fixture
def shim(lab: NetnsLab, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh shim per test (no pipeline, no entries), stopped afterwards."""
    address = lab.start_shim(NS, f"ls-cf{len(lab.shims)}", DEVICE_ID, PORTS)
    yield address
    proc = lab.shims.pop()
    proc.terminate()
    proc.wait(timeout=scaled(10))


@pytest.fixture
def client(shim: str) -> Iterator[P4RuntimeTestClient]:
    c = P4RuntimeTestClient(shim, DEVICE_ID, election_id=10)
    reply = c.arbitrate()
    assert reply.arbitration.status.code == rpc_code.OK
    c.set_pipeline()
    yield c
    c.close()


def routes() -> str:
    return run(["ip", "-6", "route", "show"], ns=NS).stdout


def entries_of_every_table(c: P4RuntimeTestClient) -> dict[str, p4r.TableEntry]:
    return {
        "my_usid": c.table_entry(
            "my_usid", {"dst_top48": top48(usid_prefix(t0_usid(0, 0)).network_address)}, "usid_shift"
        ),
        "usid_route": c.table_entry(
            "usid_route", {"dst_addr": ROUTE_KEY}, "set_next_hop", port=1, dmac=MAC_A
        ),
        "ecmp_member": c.table_entry(
            "ecmp_member", {"group_id": 1, "member": 0}, "set_next_hop", port=2, dmac=MAC_B
        ),
        "port_fault": c.table_entry("port_fault", {"port": 1}, "fault_loss", prob=100),
        "ingress_fault": c.table_entry("ingress_fault", {"port": 2}, "fault_drop"),
        "port_policy": c.table_entry(
            "port_policy", {"port": 1}, "set_port_policy", ecn_threshold=50, trim_threshold=100, last_hop=1
        ),
    }


def expect_error(code: grpc.StatusCode, call, *args) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call(*args)
    assert info.value.code() == code, info.value.details()
    return info.value


def expect_update_error(code: grpc.StatusCode, call, *args) -> tuple[grpc.RpcError, p4r.Error]:
    """A one-update Write refused: UNKNOWN at top level (P4Runtime §12.3), the update's own code
    in its p4.v1.Error, and the message at both levels."""
    err = expect_error(grpc.StatusCode.UNKNOWN, call, *args)
    (detail,) = update_statuses(err)
    assert detail.canonical_code == code.value[0], detail
    assert detail.message in err.details() and code.name in err.details()
    return err, detail


# -- arbitration ------------------------------------------------------------------
def test_higher_election_id_wins_and_backup_cannot_write(shim: str) -> None:
    low = P4RuntimeTestClient(shim, DEVICE_ID, election_id=5)
    high = P4RuntimeTestClient(shim, DEVICE_ID, election_id=9)
    try:
        assert low.arbitrate().arbitration.status.code == rpc_code.OK  # alone: primary
        reply = high.arbitrate()
        assert reply.arbitration.status.code == rpc_code.OK
        assert reply.arbitration.election_id.low == 9
        demoted = low.next_stream_message()  # the old primary is told it lost
        assert demoted.arbitration.status.code == rpc_code.ALREADY_EXISTS
        assert demoted.arbitration.election_id.low == 9
        high.set_pipeline()
        err = expect_error(
            grpc.StatusCode.PERMISSION_DENIED,
            low.insert,
            low.table_entry("port_fault", {"port": 1}, "fault_drop"),
        )
        assert "primary" in err.details()
        expect_error(grpc.StatusCode.PERMISSION_DENIED, low.set_pipeline)
        high.insert(high.table_entry("port_fault", {"port": 1}, "fault_drop"))
        assert len(low.read_table("port_fault")) == 1  # backups may read
    finally:
        low.close()
        high.close()


def test_primary_failover_when_its_stream_closes(shim: str) -> None:
    backup = P4RuntimeTestClient(shim, DEVICE_ID, election_id=1)
    primary = P4RuntimeTestClient(shim, DEVICE_ID, election_id=2)
    try:
        backup.arbitrate()
        primary.arbitrate()
        assert backup.next_stream_message().arbitration.status.code == rpc_code.ALREADY_EXISTS
        primary.set_pipeline()
        primary.close()
        promoted = backup.next_stream_message(timeout=scaled(10))
        assert promoted.arbitration.status.code == rpc_code.OK
        assert promoted.arbitration.election_id.low == 1
        backup.insert(backup.table_entry("port_fault", {"port": 2}, "fault_drop"))
    finally:
        backup.close()


def test_same_election_id_twice_is_refused(shim: str) -> None:
    a = P4RuntimeTestClient(shim, DEVICE_ID, election_id=4)
    b = P4RuntimeTestClient(shim, DEVICE_ID, election_id=4)
    try:
        a.arbitrate()
        with pytest.raises(grpc.RpcError) as info:
            b.arbitrate()
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "election_id" in info.value.details()
    finally:
        a.close()
        b.close()


def test_wrong_device_id_is_not_found(shim: str) -> None:
    c = P4RuntimeTestClient(shim, DEVICE_ID + 1, election_id=1)
    try:
        with pytest.raises(grpc.RpcError) as info:
            c.arbitrate()
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        c.close()


# -- pipeline ---------------------------------------------------------------------
def test_write_before_pipeline_is_failed_precondition(shim: str) -> None:
    c = P4RuntimeTestClient(shim, DEVICE_ID, election_id=1)
    try:
        c.arbitrate()
        expect_error(
            grpc.StatusCode.FAILED_PRECONDITION,
            c.insert,
            c.table_entry("port_fault", {"port": 1}, "fault_drop"),
        )
        expect_error(grpc.StatusCode.FAILED_PRECONDITION, c.read_table)
    finally:
        c.close()


def test_pipeline_set_and_get(client: P4RuntimeTestClient) -> None:
    req = p4r.GetForwardingPipelineConfigRequest(device_id=DEVICE_ID)
    got = client.stub.GetForwardingPipelineConfig(req, timeout=scaled(5))
    assert got.config.p4info == default_index().p4info
    assert got.config.cookie.cookie == 1
    # VERIFY checks without changing anything; a fresh VERIFY_AND_COMMIT wipes the entries.
    client.insert(client.table_entry("port_fault", {"port": 1}, "fault_drop"))
    client.set_pipeline(action=p4r.SetForwardingPipelineConfigRequest.VERIFY)
    assert len(client.read_table()) == 1
    client.set_pipeline()
    assert client.read_table() == []
    assert "chain out_p1" not in run(["nft", "list", "ruleset"], ns=NS).stdout


def test_pipeline_text_reformatted_is_the_same_p4info(client: P4RuntimeTestClient) -> None:
    info = load_p4info()
    info.tables.reverse()  # order and annotations do not matter
    info.pkg_info.doc.brief = "reformatted"
    client.set_pipeline(info)


@pytest.mark.parametrize("mutation", ["bitwidth", "missing_table", "renamed_action", "counter_size"])
def test_other_p4info_is_invalid_argument(client: P4RuntimeTestClient, mutation: str) -> None:
    info = load_p4info()
    if mutation == "bitwidth":
        info.tables[0].match_fields[0].bitwidth = 64
    elif mutation == "missing_table":
        del info.tables[-1]
    elif mutation == "renamed_action":
        info.actions[0].preamble.name = "Other.action"
    else:
        info.counters[0].size = 1
    err = expect_error(grpc.StatusCode.INVALID_ARGUMENT, client.set_pipeline, info)
    assert "p4info" in err.details()


# -- writes and reads --------------------------------------------------------------
def test_write_read_round_trip_every_table(client: P4RuntimeTestClient) -> None:
    entries = entries_of_every_table(client)
    for entry in entries.values():
        client.insert(entry)
    for table, entry in entries.items():
        assert client.read_table(table) == [entry], table
    assert len(client.read_table()) == len(entries)  # table_id 0: every table
    # MODIFY then DELETE, each reflected in a read
    changed = client.table_entry("usid_route", {"dst_addr": ROUTE_KEY}, "set_next_hop", port=2, dmac=MAC_B)
    client.modify(changed)
    assert client.read_table("usid_route") == [changed]
    assert "via fe80::ff:feaa:2 dev ls-cf-p2" in routes()
    for entry in entries.values():
        client.delete(entry)
    assert client.read_table() == []
    assert "fcbb:bb00" not in routes()


def test_read_one_entry_by_its_match(client: P4RuntimeTestClient) -> None:
    entries = entries_of_every_table(client)
    client.insert(entries["ingress_fault"])
    client.insert(client.table_entry("ingress_fault", {"port": 1}, "fault_loss", prob=7))
    query = p4r.Entity(table_entry=client.table_entry("ingress_fault", {"port": 2}))
    assert [e.table_entry for e in client.read(query)] == [entries["ingress_fault"]]


def test_full_width_bytes_are_accepted_and_read_back_canonical(client: P4RuntimeTestClient) -> None:
    entry = client.table_entry("port_fault", {"port": 1}, "fault_loss", prob=5)
    entry.match[0].exact.value = b"\x00\x01"  # 9-bit field, 2 bytes wide
    entry.action.action.params[0].value = b"\x00\x05"
    client.insert(entry)
    (back,) = client.read_table("port_fault")
    assert back.match[0].exact.value == b"\x01"
    assert back.action.action.params[0].value == b"\x05"


def test_duplicate_insert_is_already_exists(client: P4RuntimeTestClient) -> None:
    entry = entries_of_every_table(client)["usid_route"]
    client.insert(entry)
    expect_update_error(grpc.StatusCode.ALREADY_EXISTS, client.insert, entry)


def test_delete_or_modify_of_missing_entry_is_not_found(client: P4RuntimeTestClient) -> None:
    entry = entries_of_every_table(client)["my_usid"]
    expect_update_error(grpc.StatusCode.NOT_FOUND, client.delete, entry)
    expect_update_error(grpc.StatusCode.NOT_FOUND, client.modify, entry)


def _malformed(c: P4RuntimeTestClient, case: str) -> tuple[p4r.TableEntry, str]:
    e = entries_of_every_table(c)
    if case == "exact_too_wide":
        bad = e["my_usid"]
        bad.match[0].exact.value = b"\x01" + bytes(6)  # 49 bits in a 48-bit field
        return bad, "dst_top48"
    if case == "exact_noncanonical":
        bad = e["port_fault"]
        bad.match[0].exact.value = b"\x00\x00\x01"
        return bad, "port"
    if case == "lpm_prefix_too_long":
        bad = e["usid_route"]
        bad.match[0].lpm.prefix_len = 129
        return bad, "dst_addr"
    if case == "lpm_bits_beyond_prefix":
        bad = e["usid_route"]
        bad.match[0].lpm.prefix_len = 16
        return bad, "dst_addr"
    if case == "lpm_zero_prefix":
        bad = e["usid_route"]
        bad.match[0].lpm.prefix_len = 0
        return bad, "dst_addr"
    if case == "wrong_match_kind":
        bad = e["usid_route"]
        bad.match[0].exact.value = bad.match[0].lpm.value
        return bad, "dst_addr"
    if case == "missing_exact_field":
        bad = e["ecmp_member"]
        del bad.match[1]
        return bad, "member"
    if case == "unknown_field_id":
        bad = e["port_fault"]
        bad.match[0].field_id = 9
        return bad, "field_id"
    if case == "unknown_table_id":
        bad = e["port_fault"]
        bad.table_id = 0x02FFFFFF
        return bad, "table_id"
    if case == "action_not_in_table":
        bad = e["port_fault"]
        bad.action.action.action_id = default_index().action("usid_shift").id
        return bad, "action_id"
    if case == "default_only_action":
        bad = e["usid_route"]
        bad.action.action.action_id = default_index().action("drop_no_route").id
        del bad.action.action.params[:]
        return bad, "action_id"
    if case == "param_too_wide":
        bad = e["port_fault"]
        bad.action.action.params[0].value = b"\x01\x00\x00"  # prob is 16 bits
        return bad, "prob"
    if case == "missing_param":
        bad = e["usid_route"]
        del bad.action.action.params[1]
        return bad, "dmac"
    if case == "unknown_port":
        bad = c.table_entry("usid_route", {"dst_addr": ROUTE_KEY}, "set_next_hop", port=77, dmac=MAC_A)
        return bad, "port"
    if case == "priority_on_exact_table":
        bad = e["port_policy"]
        bad.priority = 10
        return bad, "priority"
    raise AssertionError(case)


MALFORMED = [
    "exact_too_wide",
    "exact_noncanonical",
    "lpm_prefix_too_long",
    "lpm_bits_beyond_prefix",
    "lpm_zero_prefix",
    "wrong_match_kind",
    "missing_exact_field",
    "unknown_field_id",
    "unknown_table_id",
    "action_not_in_table",
    "default_only_action",
    "param_too_wide",
    "missing_param",
    "unknown_port",
    "priority_on_exact_table",
]


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_entry_is_invalid_argument_naming_the_field(client: P4RuntimeTestClient, case: str) -> None:
    entry, field_name = _malformed(client, case)
    err, detail = expect_update_error(grpc.StatusCode.INVALID_ARGUMENT, client.insert, entry)
    assert field_name in err.details() and field_name in detail.message
    assert client.read_table() == []


def test_batch_reports_each_update(client: P4RuntimeTestClient) -> None:
    good = client.table_entry("port_fault", {"port": 1}, "fault_drop")
    dup = client.table_entry("port_fault", {"port": 1}, "fault_drop")
    missing = client.table_entry("port_fault", {"port": 2})
    err = expect_error(
        grpc.StatusCode.UNKNOWN,
        client.write,
        (p4r.Update.INSERT, good),
        (p4r.Update.INSERT, dup),
        (p4r.Update.DELETE, missing),
    )
    codes = [d.canonical_code for d in update_statuses(err)]
    assert codes == [rpc_code.OK, rpc_code.ALREADY_EXISTS, rpc_code.NOT_FOUND]
    assert client.read_table() == [good]


def test_default_action_can_be_modified_not_inserted(client: P4RuntimeTestClient) -> None:
    entry = p4r.TableEntry(table_id=default_index().table("usid_route").id, is_default_action=True)
    entry.action.action.action_id = default_index().action("drop_no_route").id
    client.modify(entry)
    read = client.read(
        p4r.Entity(table_entry=p4r.TableEntry(table_id=entry.table_id, is_default_action=True))
    )
    assert [e.table_entry for e in read] == [entry]
    expect_update_error(grpc.StatusCode.INVALID_ARGUMENT, client.insert, entry)


def test_default_entries_read_back_unmodified(client: P4RuntimeTestClient) -> None:
    """Every table's default entry exists from the start: a read with is_default_action
    returns the program's initial default (usid_route: drop_no_route), a wildcard read
    does not include it."""
    ix = default_index()
    one = client.read(
        p4r.Entity(table_entry=p4r.TableEntry(table_id=ix.table("usid_route").id, is_default_action=True))
    )
    assert len(one) == 1 and one[0].table_entry.is_default_action
    assert one[0].table_entry.action.action.action_id == ix.action("drop_no_route").id
    every = client.read(p4r.Entity(table_entry=p4r.TableEntry(is_default_action=True)))
    assert sorted(e.table_entry.table_id for e in every) == sorted(t.id for t in ix.tables.values())
    assert client.read_table() == []


# -- counters ---------------------------------------------------------------------
def test_counter_reads_with_and_without_index(client: P4RuntimeTestClient) -> None:
    ix = default_index()
    every = client.read(p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=ix.counter("drop_reason").id)))
    assert [e.counter_entry.index.index for e in every] == list(range(ix.counter("drop_reason").size))
    everything = client.read(p4r.Entity(counter_entry=p4r.CounterEntry()))
    assert len(everything) == sum(c.size for c in ix.counters.values())
    assert client.read_counter("ecn_marked", 1) == (0, 0)
    run(["ping", "-6", "-c", "3", "-i", "0.2", "-I", "ls-cf-q1", "ff02::1"], ns=NS, check=False)
    packets, nbytes = client.read_counter("port_rx", 1)  # ls-cf-p1 received what ls-cf-q1 sent
    assert packets >= 3 and nbytes > 0
    bad = p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=ix.counter("drop_reason").id))
    bad.counter_entry.index.index = 8
    expect_error(grpc.StatusCode.OUT_OF_RANGE, client.read, bad)


def test_capabilities(shim: str) -> None:
    c = P4RuntimeTestClient(shim, DEVICE_ID, election_id=1)
    try:
        assert c.stub.Capabilities(p4r.CapabilitiesRequest(), timeout=scaled(5)).p4runtime_api_version
    finally:
        c.close()


def test_port_policy_reaches_the_egress_program(client: P4RuntimeTestClient, lab: NetnsLab) -> None:
    def policy_in_map() -> object:
        out = run([sys.executable, "-m", "linux_target.egress", "show", "--dev", PORTS[1]], ns=NS).stdout
        return json.loads(out)["policy"]

    client.insert(entries_of_every_table(client)["port_policy"])
    cell = QUEUE_CELL_BYTES
    assert policy_in_map() == {
        "ecn_threshold_bytes": 50 * cell,
        "trim_threshold_bytes": 100 * cell,
        "last_hop": True,
    }
    client.delete(entries_of_every_table(client)["port_policy"])
    assert policy_in_map() is None
    logs = "".join(p.read_text() for p in Path(lab.run_dir).glob("*.shim.log"))
    assert "egress model on every port" in logs


def test_save_commit_and_reconcile(client: P4RuntimeTestClient) -> None:
    A = p4r.SetForwardingPipelineConfigRequest
    client.insert(client.table_entry("port_fault", {"port": 1}, "fault_drop"))
    client.set_pipeline(action=A.RECONCILE_AND_COMMIT)  # same P4Info: entries stay
    assert len(client.read_table()) == 1
    client.set_pipeline(action=A.VERIFY_AND_SAVE)
    assert len(client.read_table()) == 1  # saved, not yet committed
    client.set_pipeline(action=A.COMMIT)
    assert client.read_table() == []


def test_write_request_level_errors(client: P4RuntimeTestClient) -> None:
    entry = client.table_entry("port_fault", {"port": 1}, "fault_drop")
    req = p4r.WriteRequest(device_id=DEVICE_ID + 9)
    req.election_id.low = client.election_id
    req.updates.add(type=p4r.Update.INSERT).entity.table_entry.CopyFrom(entry)
    expect_error(grpc.StatusCode.NOT_FOUND, client.stub.Write, req)
    req.device_id = DEVICE_ID
    req.atomicity = p4r.WriteRequest.ROLLBACK_ON_ERROR
    expect_error(grpc.StatusCode.UNIMPLEMENTED, client.stub.Write, req)
    req.atomicity = p4r.WriteRequest.CONTINUE_ON_ERROR
    req.updates[0].type = p4r.Update.UNSPECIFIED
    _, detail = expect_update_error(grpc.StatusCode.INVALID_ARGUMENT, client.stub.Write, req)
    assert "type" in detail.message
    assert client.read_table() == []
