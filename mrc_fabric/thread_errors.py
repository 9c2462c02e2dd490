"""Exceptions that end a background thread: one line each, reported once, no traceback.

Why: libraries start threads of their own (grpc watches channel connectivity from one),
and an exception that ends such a thread is printed by Python as a full traceback on
stderr. On a big fabric coming up or going down, channels close under those threads, and
a user sees tracebacks with no way to tell whether anything failed. Every long-lived
process of the testbed (the testbed itself, the controller, each switch shim) installs
:func:`install` with a reporter of its own: its log, or the run's ``events.jsonl``. The
same error from the same kind of thread is reported once, with a count kept.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

_DIGITS = re.compile(r"\d+")


class ThreadErrors:
    """The ``threading.excepthook`` of one process (see :func:`install`)."""

    def __init__(self, report: Callable[[str], None]) -> None:
        self.report = report
        self.seen: Counter[tuple[str, str, str]] = Counter()
        self.lock = threading.Lock()
        self.previous: Callable[[Any], object] | None = None

    @staticmethod
    def line(args: Any) -> str:
        name = args.thread.name if args.thread is not None else "?"
        text = " ".join(str(args.exc_value).split()) if args.exc_value is not None else ""
        kind = args.exc_type.__name__ if args.exc_type is not None else "Exception"
        return f"thread {name}: {kind}: {text}" if text else f"thread {name}: {kind}"

    def __call__(self, args: Any) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "?"
        # one report per (kind of thread, exception type, message): "Thread-12" and
        # "Thread-97" are the same kind
        key = (_DIGITS.sub("N", name), getattr(args.exc_type, "__name__", "?"), str(args.exc_value))
        with self.lock:
            self.seen[key] += 1
            first = self.seen[key] == 1
        if first:
            with contextlib.suppress(Exception):  # a failing reporter must not bring the traceback back
                self.report(self.line(args))

    def uninstall(self) -> None:
        if threading.excepthook is self and self.previous is not None:
            threading.excepthook = self.previous


def install(report: Callable[[str], None]) -> ThreadErrors:
    """Make ``report`` this process's handler of exceptions that end a thread."""
    hook = ThreadErrors(report)
    hook.previous = threading.excepthook
    threading.excepthook = hook
    return hook
