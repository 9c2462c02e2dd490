"""How much slower this machine runs than the one the live run's time limits were set on.

Why: a live run waits for things — a switch to answer, the controller to start or to read
every counter, an agent to come up, EVs to recover — and a limit that suits a laptop is
far too short in a VM without KVM, where everything takes ten times as long. Every such
limit is a base figure (what the step needs on the reference machine, with a margin) times
:func:`scale`; a step that still runs out raises :class:`TimeLimitExceeded`, whose one line
says what ran out and how to give it more time.

The scale is ``$MRC_TIME_SCALE`` when set — a user's knob, and how a testbed hands the scale
it measured (:func:`settle`) to every process it starts — else 1. :func:`measure` times a
fixed piece of interpreter work, about 0.1 s of it on the reference machine, against its time
there: a slow CPU, a CPU quota and other work on the cores all show.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

ENV = "MRC_TIME_SCALE"
MAX_SCALE = 100.0
# one round of _work() on the reference machine, quiet (2 cores, Python 3.11); 60 rounds span
# about 0.1 s there, so a CPU quota's 100 ms period shows in the measure
REFERENCE_ROUND_S = 0.0016
ROUNDS = 60
NOTE_ABOVE = 1.5  # a measured scale worth a line at start (below it: this machine's own noise)


class TimeLimitExceeded(TimeoutError):
    """A step of a live run took longer than its limit (already scaled to this machine)."""

    def __init__(self, what: str, limit_s: float) -> None:
        self.what, self.limit_s = what, limit_s
        s = scale()
        super().__init__(
            f"{what} took longer than {limit_s:.0f} s: this machine is too slow for the run "
            f"(time limits x{s:g} here; {ENV}={max(2.0, 2 * s):g} allows more)"
        )


def parse(text: str) -> float:
    """A scale from its text: a number from 1 to MAX_SCALE; ValueError naming the variable."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{ENV}={text!r}: not a number") from None
    if not 1.0 <= value <= MAX_SCALE:
        raise ValueError(f"{ENV}={text!r}: must be from 1 to {MAX_SCALE:g}")
    return value


def scale() -> float:
    """This run's factor for every time limit: ``$MRC_TIME_SCALE``, else 1 (an unreadable
    value counts as 1 here; :func:`settle` reports it)."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return 1.0
    try:
        return parse(text)
    except ValueError:
        return 1.0


def scaled(seconds: float) -> float:
    """``seconds`` (a limit set on the reference machine) on this one."""
    return seconds * scale()


def _work() -> int:
    """A fixed piece of interpreter work (arithmetic and a dict), a few ms."""
    total, table = 0, {}
    for i in range(20_000):
        total += (i * i) ^ (i >> 3)
        table[i & 255] = total
    return total


def measure(rounds: int = ROUNDS, clock: Callable[[], float] = time.perf_counter) -> float:
    """How much longer ``rounds`` of ``_work`` take here than on the reference machine, at
    least 1. The whole span counts, not the best round: a CPU quota (a cgroup, a VM's share)
    or other work on the cores slows a run by the time it waits, not by its fastest moments."""
    start = clock()
    for _ in range(rounds):
        _work()
    per_round = (clock() - start) / rounds
    return round(min(MAX_SCALE, max(1.0, per_round / REFERENCE_ROUND_S)), 1)


def settle(say: Callable[[str], None] | None = None) -> float:
    """The scale of a run about to start: ``$MRC_TIME_SCALE`` when it is set (a bad value is
    reported and replaced), else measured; exported so the processes the run starts use it."""
    text = os.environ.get(ENV, "").strip()
    if text:
        try:
            return parse(text)
        except ValueError as exc:
            if say is not None:
                say(f"{exc}; measuring this machine instead")
    value = measure()
    os.environ[ENV] = f"{value:g}"
    if say is not None and value >= NOTE_ABOVE:
        say(f"this machine runs about {value:g}x slower than the reference: every time limit x{value:g}")
    return value
