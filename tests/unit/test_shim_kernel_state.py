"""How table entries map to kernel routes, neighbours and fault rules (pure, no root)."""

from __future__ import annotations

from ipaddress import IPv6Address, IPv6Network

from finsy.proto import p4r
from hypothesis import given, settings
from hypothesis import strategies as st

from linux_target.kernel_state import NextHop, RouteSpec, desired_state, link_local_of_mac
from linux_target.p4info_compare import p4info_difference
from linux_target.table_codec import decode_entry
from mrc_fabric.p4info import default_index, load_p4info

IX = default_index()
PORTS = {1: "ls-a", 2: "ls-b"}


def row(table: str, match: dict, action: str, **params: int):
    info = IX.table(table)
    e = p4r.TableEntry(table_id=info.id)
    for name, value in match.items():
        fm = e.match.add(field_id=info.match_fields[name].id)
        if isinstance(value, tuple):
            fm.lpm.value = value[0].to_bytes(16, "big")
            fm.lpm.prefix_len = value[1]
        else:
            fm.exact.value = value.to_bytes((info.match_fields[name].bitwidth + 7) // 8, "big")
    a = IX.action(action)
    e.action.action.action_id = a.id
    for name, value in params.items():
        e.action.action.params.add(
            param_id=a.params[name][0], value=value.to_bytes((a.params[name][1] + 7) // 8, "big")
        )
    r = decode_entry(IX, e, with_action=True)
    return r


def tables(*rows):
    out: dict = {alias: {} for alias in IX.tables}
    for r in rows:
        out[r.table][r.key] = r
    return out


def prefix(usid: int) -> tuple[int, int]:
    return (0xFCBBBB00 << 96) | (usid << 80), 48


def test_eui64_link_local() -> None:
    assert link_local_of_mac(0x020000000001) == IPv6Address("fe80::ff:fe00:1")
    assert link_local_of_mac(0x001122334455) == IPv6Address("fe80::211:22ff:fe33:4455")


def test_my_usid_wins_over_a_route_for_the_same_prefix() -> None:
    state = desired_state(
        tables(
            row("my_usid", {"dst_top48": 0xFCBBBB004000}, "usid_shift"),
            row("usid_route", {"dst_addr": prefix(0x4000)}, "set_next_hop", port=1, dmac=5),
        ),
        PORTS,
        IX,
    )
    assert state.routes == {IPv6Network("fcbb:bb00:4000::/48"): RouteSpec("csid")}
    assert state.neighbours == set()


def test_ecmp_groups_become_weighted_multipath_or_unreachable() -> None:
    m = [
        row("ecmp_member", {"group_id": 1, "member": i}, "set_next_hop", port=p, dmac=mac)
        for i, (p, mac) in enumerate([(1, 10), (2, 20), (1, 10), (2, 30)])
    ]
    state = desired_state(
        tables(
            *m,
            row("usid_route", {"dst_addr": prefix(0x8000)}, "set_ecmp", group_id=1, size=3),
            row("usid_route", {"dst_addr": prefix(0x8001)}, "set_ecmp", group_id=1, size=1),
            row("usid_route", {"dst_addr": prefix(0x8002)}, "set_ecmp", group_id=9, size=4),
        ),
        PORTS,
        IX,
    )
    a, b = NextHop("ls-a", 10), NextHop("ls-b", 20)
    assert state.routes[IPv6Network("fcbb:bb00:8000::/48")] == RouteSpec("multipath", ((a, 2), (b, 1)))
    assert state.routes[IPv6Network("fcbb:bb00:8001::/48")] == RouteSpec("unicast", ((a, 1),))
    assert state.routes[IPv6Network("fcbb:bb00:8002::/48")] == RouteSpec("unreachable")
    assert state.neighbours == {a, b}  # member 3 (size limit) is not used


def test_faults_by_hook() -> None:
    state = desired_state(
        tables(
            row("port_fault", {"port": 1}, "fault_loss", prob=13107),
            row("ingress_fault", {"port": 2}, "fault_drop"),
            row("port_policy", {"port": 1}, "set_port_policy", ecn_threshold=1, trim_threshold=2, last_hop=1),
        ),
        PORTS,
        IX,
    )
    assert {k: (v.ifname, v.loss) for k, v in state.faults.items()} == {
        ("egress", 1): ("ls-a", 13107),
        ("ingress", 2): ("ls-b", None),
    }
    assert state.routes == {}


def test_p4info_comparison() -> None:
    same = load_p4info()
    same.tables.reverse()
    assert p4info_difference(IX.p4info, same) is None
    other = load_p4info()
    next(a for a in other.actions if a.preamble.alias == "set_next_hop").params[0].bitwidth = 10
    assert "set_next_hop" in (p4info_difference(IX.p4info, other) or "")


class _Recorder:
    """Stands in for the kernel programmer to check which states the tables ask for."""

    def __init__(self) -> None:
        self.last = None

    def transition(self, old, new) -> None:
        self.last = new


_ENTRY_CHOICES = [
    ("my_usid", {"dst_top48": 0xFCBBBB008000}, "usid_shift", {}),
    ("usid_route", {"dst_addr": prefix(0x8000)}, "set_next_hop", {"port": 1, "dmac": 7}),
    ("usid_route", {"dst_addr": prefix(0x8000)}, "set_ecmp", {"group_id": 1, "size": 2}),
    ("usid_route", {"dst_addr": prefix(0x8001)}, "set_ecmp", {"group_id": 1, "size": 3}),
    ("usid_route", {"dst_addr": prefix(0x8002)}, "set_ecmp", {"group_id": 2, "size": 1}),
    ("ecmp_member", {"group_id": 1, "member": 0}, "set_next_hop", {"port": 1, "dmac": 1}),
    ("ecmp_member", {"group_id": 1, "member": 1}, "set_next_hop", {"port": 2, "dmac": 2}),
    ("ecmp_member", {"group_id": 1, "member": 2}, "set_next_hop", {"port": 2, "dmac": 2}),
    ("ecmp_member", {"group_id": 2, "member": 0}, "set_next_hop", {"port": 1, "dmac": 3}),
    ("port_fault", {"port": 1}, "fault_drop", {}),
    ("port_fault", {"port": 1}, "fault_loss", {"prob": 5}),
    ("ingress_fault", {"port": 2}, "fault_loss", {"prob": 9}),
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 3]), st.integers(0, len(_ENTRY_CHOICES) - 1)), max_size=25))
def test_incremental_state_equals_full_recompute(ops) -> None:
    """Whatever the order of writes, the per-update state equals the state rebuilt from scratch."""
    from linux_target.errors import P4RuntimeError
    from linux_target.switch_tables import SwitchTables

    rec = _Recorder()
    sw = SwitchTables(IX, PORTS, rec)
    for kind, choice in ops:
        table, match, action, params = _ENTRY_CHOICES[choice]
        entry = row(table, match, action, **params).proto
        try:
            sw.apply(kind, entry)
        except P4RuntimeError:
            continue  # duplicate insert / missing entry: nothing changes
        full = desired_state(sw.tables, PORTS, IX)
        assert (sw.state.routes, sw.state.neighbours, sw.state.faults) == (
            full.routes,
            full.neighbours,
            full.faults,
        )
