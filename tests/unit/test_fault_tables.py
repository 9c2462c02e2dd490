"""The fault tables' three readings agree, because they share one description
(``mrc_fabric.fault_tables``): what the controller writes for a loss, what it adopts back from a
switch, what its table walk and the Linux target make of the same entry."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.adopt import adopt_entries
from controller.compiler import compile_routes
from controller.faults import Direction, FaultKind, FaultSpec, fault_entries, port_entry, resolve
from controller.tablewalk import _fault
from linux_target.kernel_state import desired_state
from linux_target.table_codec import decode_entry
from mrc_fabric.fault_tables import FAULT_TABLE, FAULT_TABLES, LOSS_SCALE, PortFault
from mrc_fabric.p4info import default_index
from mrc_fabric.topology import build_clos
from mrc_p4rt.codec import encode_entry

TOPO = build_clos(planes=1, t0_per_plane=2, t1_per_plane=2, hosts_per_t0=1)


@given(st.floats(min_value=0.0, max_value=1.0), st.booleans())
def test_written_walked_and_read_back_alike(survive: float, drop: bool) -> None:
    entry = port_entry(FAULT_TABLE["egress"], 3, drop, survive)
    fault = PortFault.combined(drop, survive)
    if entry is None:
        assert fault is None and not drop and round((1 - survive) * LOSS_SCALE) == 0
        return
    assert fault is not None and PortFault.of_action(entry.action, dict(entry.params)) == fault
    hole, loss = _fault(entry)
    assert (hole, loss) == (drop, fault.loss)
    assert drop or abs(loss - (1 - survive)) <= 1 / LOSS_SCALE


@given(st.integers(min_value=1, max_value=LOSS_SCALE - 1))
def test_a_loss_fault_survives_the_round_trip_through_a_switch(prob: int) -> None:
    """Injected, written, decoded by the Linux target and adopted back: the same loss."""
    link = f"{TOPO.switches[0].name}-{TOPO.switches[-1].name}"
    spec = FaultSpec(FaultKind.LOSS, link, Direction.A2B, prob / LOSS_SCALE)
    [(switch, entries)] = fault_entries(resolve(TOPO, spec)).items()
    [entry] = entries
    ix = default_index()
    row = decode_entry(ix, encode_entry(ix, entry), with_action=True)
    ports = {e.port: e.ifname for e in TOPO.ports_of(switch)}
    state = desired_state({row.table: {row.key: row}}, ports, ix)
    [rule] = state.faults.values()
    assert rule.hook == FAULT_TABLES[entry.table] and rule.loss == prob
    [adopted] = adopt_entries(TOPO, switch, compile_routes(TOPO)[switch], [entry]).faults
    assert adopted.kind == FaultKind.LOSS and round(adopted.probability * LOSS_SCALE) == prob
