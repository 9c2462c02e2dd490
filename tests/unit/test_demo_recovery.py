"""The demo's line about recovery names what did not come back, or says nothing was there."""

from __future__ import annotations

from mrc_fabric.time_scale import scaled
from topologies.demo import MAX_EV_LINES, RECOVERY_TIMEOUT_S, recovery_line


def test_recovered_says_how_long() -> None:
    assert recovery_line(1.234, {"a": "GOOD"}).startswith("no EV retired any more 1.23 s after")


def test_no_ev_listed_says_the_connection_was_gone_instead_of_an_empty_dict() -> None:
    line = recovery_line(None, {})
    assert "{}" not in line and "listed no EV" in line and f"{scaled(RECOVERY_TIMEOUT_S):.0f} s" in line


def test_stuck_evs_are_counted_by_state_and_named() -> None:
    states = {f"{i:08x}": "ASSUMED_BAD" for i in range(MAX_EV_LINES + 3)}
    states |= {"ffff0000": "PROBING", "ffff0001": "GOOD", "ffff0002": "SKIP"}
    line = recovery_line(None, states)
    stuck = MAX_EV_LINES + 4
    assert line.startswith(f"{stuck} of {stuck + 2} EVs still not usable")
    assert f"{MAX_EV_LINES + 3} ASSUMED_BAD, 1 PROBING" in line
    assert "00000000 ASSUMED_BAD" in line and line.endswith(f"and {stuck - MAX_EV_LINES} more")
    assert "ffff0001" not in line and "ffff0002" not in line
