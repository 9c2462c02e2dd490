"""The demo's line about recovery names what did not come back, or says nothing was there."""

from __future__ import annotations

import time

from topologies.demo import MAX_EV_LINES, recovery_line, wait_recovered


def test_recovered_says_how_long() -> None:
    assert recovery_line(1.234, {"a": "GOOD"}).startswith("no EV retired any more 1.23 s after")


def test_no_ev_listed_says_the_connection_was_gone_instead_of_an_empty_dict() -> None:
    line = recovery_line(None, {})
    assert "{}" not in line and line.startswith("nothing to recover") and "no connection" in line


class _Client:
    def __init__(self, rows: list[list[dict[str, str]]]) -> None:
        self.rows, self.calls = rows, 0

    def evs(self) -> list[dict[str, str]]:
        self.calls += 1
        return self.rows[min(self.calls, len(self.rows)) - 1]


class _Testbed:
    def __init__(self, client: _Client) -> None:
        self.client = client

    def agent(self, name: str) -> _Testbed:
        return self


def test_a_sender_without_a_connection_ends_the_wait_at_once() -> None:
    """The faulted transfer's connection was dropped: nothing is left to probe, so the demo
    says so at once instead of waiting out the (scaled) recovery limit."""
    tb = _Testbed(_Client([[{"ev": "a", "peer": "other", "conn": "send", "state": "ASSUMED_BAD"}]]))
    t0 = time.monotonic()
    assert wait_recovered(tb, "h0", "h3", 600.0) == (None, {})  # type: ignore[arg-type]
    assert time.monotonic() - t0 < 5 and tb.client.calls == 1


def test_the_wait_ends_when_every_ev_is_usable_again() -> None:
    bad = {"ev": "a", "peer": "h3", "conn": "send", "state": "ASSUMED_BAD"}
    tb = _Testbed(_Client([[bad], [bad], [bad | {"state": "GOOD"}]]))
    seconds, states = wait_recovered(tb, "h0", "h3", 600.0)  # type: ignore[arg-type]
    assert seconds is not None and states == {"a": "GOOD"} and tb.client.calls == 3


def test_stuck_evs_are_counted_by_state_and_named() -> None:
    states = {f"{i:08x}": "ASSUMED_BAD" for i in range(MAX_EV_LINES + 3)}
    states |= {"ffff0000": "PROBING", "ffff0001": "GOOD", "ffff0002": "SKIP"}
    line = recovery_line(None, states)
    stuck = MAX_EV_LINES + 4
    assert line.startswith(f"{stuck} of {stuck + 2} EVs still not usable")
    assert f"{MAX_EV_LINES + 3} ASSUMED_BAD, 1 PROBING" in line
    assert "00000000 ASSUMED_BAD" in line and line.endswith(f"and {stuck - MAX_EV_LINES} more")
    assert "ffff0001" not in line and "ffff0002" not in line
