"""A stop signal taken by another thread still ends the main thread's wait.

The kernel gives a process-directed SIGTERM to any thread that does not block it; CPython
runs the handler in the main thread only, when that thread runs Python code. A switch shim
(and the controller) waited in an untimed ``Event.wait()`` that no other thread's signal
wakes: under load a shim took its SIGTERM on a gRPC thread and served on until killed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mrc_fabric.time_scale import scaled

ROOT = Path(__file__).resolve().parents[2]

# the SIGTERM goes to a thread other than the main one (pthread_kill), as the kernel may send it
PROGRAM = """
import signal, sys, threading
from mrc_fabric.stop_wait import wait_for_stop
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
hold = threading.Event()
other = threading.Thread(target=hold.wait, daemon=True)
other.start()
threading.Timer(0.2, signal.pthread_kill, (other.ident, signal.SIGTERM)).start()
wait_for_stop(stop)  # (``stop.wait()`` here sleeps on: the handler never runs)
print("stopped", flush=True)
"""


def _run(timeout: float) -> subprocess.CompletedProcess[str] | None:
    """The program's result, or None if it still waited after ``timeout`` (killed then)."""
    try:
        return subprocess.run(
            [sys.executable, "-c", PROGRAM], cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None


def test_a_signal_another_thread_takes_ends_the_wait() -> None:
    done = _run(scaled(20))
    assert done is not None, "wait_for_stop did not return after a SIGTERM to another thread"
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stopped"
