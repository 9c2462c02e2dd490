"""Waiting in a process's main thread for a signal handler to say stop.

Why: CPython runs a signal handler only in the main thread, and only when that thread runs
Python code. The kernel gives a process-directed signal to any thread that does not block
it, and gRPC's own threads take a SIGTERM as often as the main thread does; the handler
then waits for a main thread asleep in an untimed ``Event.wait()``, which no signal of
another thread wakes. A switch shim under load took its SIGTERM that way and served on
until it was killed. A timed wait wakes the main thread to run the handler.
"""

from __future__ import annotations

import threading

TICK_S = 0.2  # the longest a handler waits to run once its signal is taken


def wait_for_stop(stop: threading.Event, tick_s: float = TICK_S) -> None:
    """Return once ``stop`` is set, by a signal handler or another thread."""
    while not stop.wait(tick_s):
        pass
