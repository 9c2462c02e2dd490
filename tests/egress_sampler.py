"""Samples a Linux-target switch port's virtual queue against HTB's backlog, as JSON lines.

A fixture of tests/integration/test_linux_egress.py, run inside the switch namespace:
``python tests/egress_sampler.py --dev IF [--timeout S]``. It reads the egress program's state
through linux_target.egress, so it needs nothing but the installed package.
"""

from __future__ import annotations

import argparse
import json
import time

from linux_target.egress import PortEgress, data_fifo


def sample(port: PortEgress, timeout: float) -> None:
    """Virtual queue against HTB's backlog, every 10 ms until a queue that was seen non-empty
    is empty again (or ``timeout``): how closely the program tracks HTB.

    Reading HTB's backlog costs a ``tc`` process, and on a loaded machine that can take tens of
    milliseconds, during which HTB drains. So each line brackets the read: the virtual queue
    evaluated at the clock just before and just after it (the program's state only changes when
    a frame passes, and it drains at a known rate, so it can be evaluated at any instant). The
    true virtual queue at the moment tc read the backlog lies between the two, and a reader can
    compare without guessing when that moment was.

    Each line also says how far the sample can be trusted: ``t_state_ns``, the clock before the
    program's state was read, with the frames the program had passed by then
    (``sent_packets``), tells a sample taken mid-burst from one taken after it and bounds when
    a burst began; ``htb_sent_bytes``, what the data fifo had handed to HTB, tells whether HTB
    kept its rate since then."""
    rate, _buffer = port.read_link()
    seen = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t_state = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        state = port.read_state()
        before = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        fifo = data_fifo(port.dev)
        after = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        line = {
            "t_state_ns": t_state,
            "sent_packets": state.sent_packets,
            "virtual_before": state.queue_at(before, rate),
            "virtual_after": state.queue_at(after, rate),
            "htb": fifo.backlog_bytes,
            "htb_sent_bytes": fifo.sent_bytes,
            "t_before_ns": before,
            "t_after_ns": after,
        }
        print(json.dumps(line), flush=True)
        if fifo.backlog_bytes or line["virtual_before"]:
            seen = True
        elif seen:
            return
        time.sleep(0.01)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dev", required=True)
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args()
    sample(PortEgress(args.dev), args.timeout)


if __name__ == "__main__":
    main()
