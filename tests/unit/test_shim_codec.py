"""Validation of P4Runtime table entries by the Linux shim (no root: pure decoding)."""

from __future__ import annotations

import pytest
from finsy.proto import p4r

from linux_target.errors import P4RuntimeError
from linux_target.table_codec import canonical_bytes, decode_bytes, decode_entry
from mrc_fabric.p4info import default_index

IX = default_index()


def entry(
    table: str, match: dict[str, bytes | tuple[bytes, int]], action: str | None = None, **params: bytes
) -> p4r.TableEntry:
    info = IX.table(table)
    e = p4r.TableEntry(table_id=info.id)
    for name, value in match.items():
        fm = e.match.add(field_id=info.match_fields[name].id)
        if isinstance(value, tuple):
            fm.lpm.value, fm.lpm.prefix_len = value
        else:
            fm.exact.value = value
    if action:
        a = IX.action(action)
        e.action.action.action_id = a.id
        for name, value in params.items():
            e.action.action.params.add(param_id=a.params[name][0], value=value)
    return e


def test_canonical_bytes() -> None:
    assert canonical_bytes(0) == b"\x00"
    assert canonical_bytes(0x1FF) == b"\x01\xff"
    assert decode_bytes(b"\x00\x05", 9, "x") == 5  # full width accepted
    assert decode_bytes(b"\x05", 9, "x") == 5


@pytest.mark.parametrize("data,width", [(b"", 8), (b"\x02\x00", 9), (b"\x00\x00\x05", 16), (b"\x00\x05", 48)])
def test_bad_byte_strings(data: bytes, width: int) -> None:
    with pytest.raises(P4RuntimeError, match="field_x"):
        decode_bytes(data, width, "field_x")


def test_decoded_entry_is_canonical() -> None:
    e = entry(
        "usid_route",
        {"dst_addr": ((0xFCBBBB008000 << 80).to_bytes(16, "big"), 48)},
        "set_next_hop",
        port=b"\x00\x02",
        dmac=b"\x00\x00\x00\x00\x00\x07",
    )
    row = decode_entry(IX, e, with_action=True)
    assert row.action.name == "set_next_hop" and row.action.params == {"port": 2, "dmac": 7}
    assert row.proto.action.action.params[0].value == b"\x02"
    assert row.proto.match[0].lpm.value == (0xFCBBBB008000 << 80).to_bytes(16, "big")
    assert row.field("dst_addr", IX) == (0xFCBBBB008000 << 80, 48)


def test_delete_needs_no_action() -> None:
    row = decode_entry(IX, entry("port_fault", {"port": b"\x01"}), with_action=False)
    assert row.key == ((IX.table("port_fault").match_fields["port"].id, 1, -1),)


@pytest.mark.parametrize(
    "build,field",
    [
        (lambda: entry("my_usid", {"dst_top48": b"\x01" * 7}, "usid_shift"), "dst_top48"),
        (lambda: entry("usid_route", {"dst_addr": (b"\x01", 129)}, "drop_no_route"), "dst_addr"),
        (
            lambda: entry(
                "usid_route", {"dst_addr": (b"\xff" * 16, 64)}, "set_ecmp", group_id=b"\x01", size=b"\x02"
            ),
            "dst_addr",
        ),
        (
            lambda: entry("ecmp_member", {"group_id": b"\x01"}, "set_next_hop", port=b"\x01", dmac=b"\x01"),
            "member",
        ),
        (
            lambda: entry("port_fault", {"port": b"\x01"}, "set_next_hop", port=b"\x01", dmac=b"\x01"),
            "action_id",
        ),
        (lambda: entry("port_fault", {"port": b"\x01"}, "fault_loss"), "prob"),
        (lambda: entry("port_fault", {"port": b"\x01"}, "fault_loss", prob=b"\x01\x00\x00"), "prob"),
        (
            lambda: entry(
                "port_policy",
                {"port": b"\x01"},
                "set_port_policy",
                ecn_threshold=b"\x08\x00\x00",
                trim_threshold=b"\x01",
                last_hop=b"\x01",
            ),
            "ecn_threshold",
        ),
        (
            lambda: entry(
                "port_policy",
                {"port": b"\x01"},
                "set_port_policy",
                ecn_threshold=b"\x01",
                trim_threshold=b"\x01",
                last_hop=b"\x02",
            ),
            "last_hop",
        ),
    ],
)
def test_invalid_entries_name_the_field(build, field: str) -> None:
    with pytest.raises(P4RuntimeError) as info:
        decode_entry(IX, build(), with_action=True)
    assert info.value.code.name == "INVALID_ARGUMENT"
    assert field in info.value.message


def test_unknown_ids_and_priority() -> None:
    e = entry("port_fault", {"port": b"\x01"}, "fault_drop")
    e.table_id = 12345
    with pytest.raises(P4RuntimeError, match="table_id"):
        decode_entry(IX, e, with_action=True)
    e = entry("port_fault", {"port": b"\x01"}, "fault_drop")
    e.action.action.action_id = 99
    with pytest.raises(P4RuntimeError, match="action_id"):
        decode_entry(IX, e, with_action=True)
    e = entry("port_fault", {"port": b"\x01"}, "fault_drop")
    e.priority = 1
    with pytest.raises(P4RuntimeError, match="priority"):
        decode_entry(IX, e, with_action=True)
