"""Python's cycle collector kept off a simulation while it is built and while it runs.

Why: a 64-host all-to-all builds about two million objects that live as long as the run
(an entry per EV per connection end, their counters and tables), and its run allocates
millions more that die young (packets, messages, events). Each collection walks what it
finds alive: while a network was built, collections of the oldest generation took nearly
half of the build, and during a run collections took a fifth to a quarter of it. Yet a
run makes no cyclic garbage (what it drops is freed by reference counting;
tests/unit/test_sim_gc.py holds faulted runs, every mode and PFC to that), so the collector has
nothing to do until the run ends: it is off inside the block and back on afterwards,
when it finds whatever the caller drops (a process that runs many simulations, a sweep
worker or the tests, frees each network as before).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cycle collection inside the block (building or running a network)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
