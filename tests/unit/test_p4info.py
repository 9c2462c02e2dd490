import pytest

from mrc_fabric.p4info import P4InfoError, default_index


def test_design_names_resolve() -> None:
    ix = default_index()
    for table in ("my_usid", "usid_route", "port_fault", "port_policy"):
        assert ix.table(table).id >> 24 == 0x02
    assert ix.table("usid_route").match_fields["dst_addr"].bitwidth == 128
    assert ix.action("set_next_hop").params == {"port": (1, 9), "dmac": (2, 48)}
    assert ix.table(ix.table("my_usid").id).alias == "my_usid"
    assert ix.counter("MrcIngress.port_rx").size == 512


def test_unknown_names_raise() -> None:
    with pytest.raises(P4InfoError, match="no table named 'nope'"):
        default_index().table("nope")
