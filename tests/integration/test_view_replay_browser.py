"""The web view's replay in a real browser (no root: a recording written here, no fabric).

A recording of ten seconds with faults at 2.3017 s and 6.1234 s, between the replay slider's
steps (duration / 2000): "next fault →" must land on each fault in turn (the slider rounds
to its step, so a page that reads its time back from the slider lands just before the first
fault and finds it again forever), then have no further fault to go to, showing each fault's
state at its time: the link red, the switch down, though the recorded fault list (a live view
reads it at its next poll) comes 50 ms after the injection event. A replay cannot start a
transfer, so it never asks the reader to.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import browser_missing, chromium
from live_fabric import wait_until

from mrc_fabric import recording
from mrc_fabric.topology import build_clos

FAULTS = (2.3017, 6.1234)
DURATION = 10.0
POLL_LAG_S = 0.05  # the fault list read after the event, as the live collector records it
SWITCH = "rpt1p1n0"


def write_recording(path: Path) -> None:
    topo = build_clos(2, 2, 2, 2, prefix="rp")
    head = recording.header("demo", "replay test", 1.0e9, recording.graph_from_topology(topo))
    link = topo.links[-1].name
    records: list[dict[str, Any]] = []
    for i in range(int(DURATION * 2) + 1):
        records.append({"k": "sample", "t": i / 2, "links": {link: [float(i), 0.0]}})
    hole = {"id": "f1", "kind": "blackhole", "target": link, "direction": "both", "detail": ""}
    hole |= {"links": [link], "switches": []}
    down = {"id": "f2", "kind": "switch_down", "target": SWITCH, "direction": "both", "detail": ""}
    down |= {"links": [], "switches": [SWITCH]}
    active: list[dict[str, Any]] = []
    for n, (t, fault) in enumerate(zip(FAULTS, (hole, down), strict=True), 1):
        active = [*active, fault]
        records.append({"k": "faults", "t": t + POLL_LAG_S, "faults": active})
        event = {
            "k": "event",
            "t": t,
            "kind": "fault_injected",
            "fault": f"f{n}",
            "text": f"f{n}",
            "level": "warn",
        }
        records.append(event)
    records.sort(key=lambda r: float(r["t"]))
    writer = recording.RecordingWriter(path / recording.FILE_NAME, head)
    writer.write_all(records)
    writer.close()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if why := browser_missing():
        pytest.skip(why)
    from mrc_view.replay import load
    from mrc_view.server import ViewServer

    run = tmp_path_factory.mktemp("replay")
    write_recording(run)
    server = ViewServer(replays=load(run), port=0)
    server.start()
    try:
        with chromium(server.url) as driver:
            wait_until(lambda: driver.execute_script("return document.body.dataset.t") is not None, "a frame")
            yield driver
    finally:
        server.stop()


def page_time(driver: Any) -> float:
    return float(driver.execute_script("return document.body.dataset.t || -1"))


def test_next_fault_steps_through_every_fault_then_stops(page: Any) -> None:
    from selenium.webdriver.common.by import By

    button = page.find_element(By.ID, "nextfault")
    link_state = (
        "return [...document.querySelectorAll('g.link')].filter((g) => g.dataset.state === 'fault').length"
    )
    switch_state = (
        f"return [...document.querySelectorAll('g.node[data-node=\"{SWITCH}\"]')].map((g) => g.dataset.state)"
    )
    for t in FAULTS:
        button.click()
        wait_until(lambda t=t: abs(page_time(page) - t) < 1e-9, f"the replay at the fault at {t} s")
        # the fault shows at its own time, not only once the slider moved past the recorded list
        assert page.execute_script(link_state) == 1
    assert page.execute_script(switch_state) == ["down"]
    assert button.get_attribute("disabled") is not None  # no fault after the last
    assert abs(page_time(page) - FAULTS[-1]) < 1e-9


def test_a_replay_does_not_ask_for_a_transfer(page: Any) -> None:
    text = page.execute_script("return document.getElementById('conns').textContent")
    assert "start a transfer" not in text and "recording" in text
