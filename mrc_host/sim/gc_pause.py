"""Python's cycle collector kept off a simulation's long-lived objects.

Why: a 64-host all-to-all builds about two million objects that live as long as the run
(an entry per EV per connection end, their counters and tables). Each collection of the
oldest generation walks every one of them, and while they were being made such
collections took nearly half of the build. So the collector is off while a network is
built, and what was built is then frozen (``gc.freeze``: moved where no collection looks)
for the run; the run's own short-lived garbage is still collected as usual. Afterwards
the built objects are handed back to the collector, so a process that runs many
simulations (a sweep worker, the tests) frees them as before.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cycle collection inside the block (building a network)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextmanager
def frozen_while_running() -> Iterator[None]:
    """What exists now is left out of every collection inside the block (running it)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
