"""How many stateless answers (RETRY, RESET) the agent sends, and to whom.

Why keyed by queue pair, with a global cap: every answer goes to the address the request
*claims*, so a flood of forged requests must neither make this agent a reflector aimed at
that host nor cost it unbounded CPU. The buckets are per queue pair (peer and mode: a RETRY
for one carries the cookie that opens it, ``cookies.py``, so the answers a flood draws for a
claimed peer's queue pair still reach that peer and open its connection) and one for all, so
a flood claiming many peers still draws a bounded number. Pure: times come in as ``now_ns``.
"""

from __future__ import annotations

from typing import Final

RETRY_RATE_PER_S: Final = 100  # per claimed queue pair
RETRY_BURST: Final = 50
RETRY_TOTAL_PER_S: Final = 2000  # every queue pair together
RETRY_TOTAL_BURST: Final = 200
RESET_RATE_PER_S: Final = 20  # per claimed queue pair: a restarted agent's answer to stale DATA
RESET_BURST: Final = 5


class TokenBuckets:
    """A token bucket per key (the keys are bounded by the caller: decoded queue pairs of
    configured peers), plus one bucket that every take also draws from."""

    def __init__(self, rate: float, burst: float, total_rate: float, total_burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.total_rate, self.total_burst = total_rate, total_burst
        self._buckets: dict[int, tuple[float, int]] = {}  # key -> (tokens, when)
        self._total: tuple[float, int] | None = None

    def take(self, key: int, now_ns: int) -> bool:
        """Whether one answer for ``key`` may go now (and counts it)."""
        tokens, when = self._buckets.get(key, (self.burst, now_ns))
        tokens = min(self.burst, tokens + (now_ns - when) * self.rate / 1e9)
        total, twhen = self._total or (self.total_burst, now_ns)
        total = min(self.total_burst, total + (now_ns - twhen) * self.total_rate / 1e9)
        if tokens < 1.0 or total < 1.0:
            self._buckets[key], self._total = (tokens, now_ns), (total, now_ns)
            return False
        self._buckets[key], self._total = (tokens - 1.0, now_ns), (total - 1.0, now_ns)
        return True


def retry_buckets() -> TokenBuckets:
    return TokenBuckets(RETRY_RATE_PER_S, RETRY_BURST, RETRY_TOTAL_PER_S, RETRY_TOTAL_BURST)


def reset_buckets() -> TokenBuckets:
    return TokenBuckets(RESET_RATE_PER_S, RESET_BURST, RETRY_TOTAL_PER_S, RETRY_TOTAL_BURST)
