"""SIGINT, SIGTERM and SIGHUP while a testbed runs: turned into exceptions, so the ``with``
block's teardown runs; held off while the teardown itself runs; then given back.

Only the main thread may set handlers: from any other, :class:`SignalGuard` does nothing and
the caller owns the cleanup.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _on_signal(signum: int, _frame: Any) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


class SignalGuard:
    """The handlers a run installed, and the ones they replaced."""

    def __init__(self) -> None:
        self._old: dict[int, Any] = {}

    def install(self) -> None:
        """A signal now ends the run as an exception (KeyboardInterrupt, SystemExit(128+n))."""
        if _main_thread():
            for sig in HANDLED_SIGNALS:
                self._old[sig] = signal.signal(sig, _on_signal)

    def hold(self) -> dict[int, Any]:
        """Ignore the signals (during a teardown); what :meth:`restore` needs."""
        if not _main_thread():
            return {}
        return {sig: signal.signal(sig, signal.SIG_IGN) for sig in HANDLED_SIGNALS}

    def restore(self, held: dict[int, Any]) -> None:
        """The handlers from before :meth:`install` back (or those :meth:`hold` replaced)."""
        for sig in held:
            signal.signal(sig, self._old.pop(sig, held[sig]))
