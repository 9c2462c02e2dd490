"""The fidelity monitor on live fabrics: it passes a quiet run and flags a starved one.

Starvation on purpose, large enough to be unmistakable on a busy two-core machine: every
thread of the victim is pinned to CPU 0 under the normal scheduler at nice 19 (its session's
autogroup too), beside two busy loops pinned there, for a few seconds of a transfer; it then
gets about 1 % of a CPU. Without autogroups (``kernel.sched_autogroup_enabled=0``) a starved
switch's threads wanted under half a core and waited 23-55 % of each second, 7-15 ms per
wake-up, which counts as *starved* (``judge.process_problems``) as a thread wanting more
does. Linux target (root): the sending agent is the victim. BMv2 (root, ``bmv2``): every
switch is. A quiet run at the calibrated link rate (the default where this
machine has no calibration) must be *faithful*. Prefix ``fq``; each fabric must leave nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_fabric import skip_without_agent

from mrc_fabric.time_scale import scaled

pytestmark = pytest.mark.root

PREFIX = "fq"
STARVE_S = 6.0  # seconds of starvation: six judged intervals at least
HOGS = 2
SRC, DST = f"{PREFIX}h0", f"{PREFIX}h3"


@contextlib.contextmanager
def fabric(target: str, link_rate: float | str | None) -> Iterator[Any]:
    from topologies.leaks import leftovers
    from topologies.testbed import Testbed, TestbedConfig

    skip_without_agent()
    root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-runs-"))
    cfg = TestbedConfig(prefix=PREFIX, runs_root=root, target=target, link_rate=link_rate, pcap=False)
    tb = Testbed(cfg, say=lambda _m: None)
    try:
        with tb:
            yield tb
    finally:
        tb.stop()
        left = leftovers(tb.run.path, tb.namespaces, PREFIX, tb.teardown_ticks) if tb.run else []
        shutil.rmtree(root, ignore_errors=True)
    assert left == []


@contextlib.contextmanager
def starved(pids: list[int], cpu: int = 0) -> Iterator[None]:
    """Every thread of ``pids`` on CPU ``cpu`` at the least weight, beside busy loops there."""
    from topologies.placement import pin, set_normal

    for pid in pids:
        set_normal(pid, 19)
        pin(pid, {cpu})
    hogs = [
        subprocess.Popen(
            ["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"],
            start_new_session=True,  # an autogroup of its own, at the default weight
        )
        for _ in range(HOGS)
    ]
    try:
        yield
    finally:
        for hog in hogs:
            hog.send_signal(signal.SIGKILL)
            hog.wait()
        for pid in pids:
            pin(pid, set(range(os.cpu_count() or 1)))
            set_normal(pid, 0)


def transfer_while_starved(tb: Any, victims: list[int], size: int) -> Any:
    """A transfer whose first STARVE_S seconds run starved; the verdict of the transfer."""
    tb.send(SRC, DST, 1 << 20)  # the connection is open before the mark
    mark = tb.fidelity.mark()
    done: dict[str, Any] = {}
    sender = threading.Thread(target=lambda: done.update(tb.send(SRC, DST, size)), daemon=True)
    with starved(victims):
        sender.start()
        time.sleep(STARVE_S)
    sender.join(timeout=scaled(180))
    assert not sender.is_alive() and done.get("ok"), done
    return tb.fidelity.verdict(since=mark)


def test_a_quiet_run_at_the_calibrated_rate_is_faithful() -> None:
    with fabric("linux", "calibrated") as tb:
        assert tb.config.link_rate and "calibrat" in tb.rate_source  # a number, and where it came from
        tb.send(SRC, DST, 1 << 20)
        mark = tb.fidelity.mark()
        summary = tb.send(SRC, DST, 8 << 20)
        verdict = tb.fidelity.verdict(since=mark)
        tb.stop_fidelity()  # the whole run's verdict, written before the fabric's runs go
        written = json.loads((tb.run.path / "fidelity.json").read_text())
    assert summary["ok"]
    assert verdict.faithful, verdict.text
    assert verdict.active_intervals >= 1
    figures = verdict.figures
    assert figures["link_rate_mbit_s"] == tb.config.link_rate
    assert f"agent {SRC}" in figures["processes"] and f"agent {DST}" in figures["processes"]
    assert figures["drops"]["frames"] > (8 << 20) // 4096  # the transfer's frames, all counted
    assert written["final"] and written["verdict"]  # for the view and the CLI as well
    # the sender paced its DATA at the link's rate (mrc_host/agent/pacer.py): the frames waited
    # in its pacer, and its host links' HTB held a few frames, not a window (unpaced: 22-71). A
    # late loop may catch up 2 ms at once and SACKs/probes go unpaced: 5 was seen once, so the
    # bound is 8, still far below a window
    pacers = figures["agent_pacers"]
    assert sum(p["paced"] for k, p in pacers.items() if k.startswith(f"{SRC}-")) >= (8 << 20) // 4096
    uplinks = {k: v["backlog_max"] for k, v in figures["links"].items() if k.startswith(f"{SRC}>")}
    assert uplinks and max(uplinks.values()) <= 8, uplinks


def test_an_agent_starved_on_purpose_is_not_faithful() -> None:
    with fabric("linux", 20.0) as tb:
        verdict = transfer_while_starved(tb, [tb.agents[SRC].proc.pid], 8 << 20)
    assert not verdict.faithful
    assert any(r.startswith(f"agent {SRC} starved") for r in verdict.reasons), verdict.reasons


@pytest.mark.bmv2
def test_bmv2_switches_starved_on_purpose_are_not_faithful() -> None:
    with fabric("bmv2", 5.0) as tb:
        switches = [sw.process.proc.pid for sw in tb.net.switches]
        verdict = transfer_while_starved(tb, switches, 4 << 20)
    assert not verdict.faithful
    starved_switches = [r for r in verdict.reasons if r.startswith(f"bmv2 {PREFIX}t") and "starved" in r]
    assert starved_switches, verdict.reasons
