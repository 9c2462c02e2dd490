"""The sending side of receiver credits (UET's RCCC): what a sender may send, and what it asks for.

The receiver's NIC grants each sender CREDITs (cumulative payload bytes, ``credit_rx.py``),
round robin at its port's rate. A DATA packet leaves only while the sender's *balance*,
credit granted and not yet spent, is positive; the packet spends its size and may take the
balance below zero by less than a packet (UET's rule: any credit sends a whole packet).
Before anything comes back from the receiver, at the start and after being idle, a sender
*speculates*: it sends up to ``RcccParams.speculative_bdps`` of its BDP unscheduled, which
covers the round trip its first request takes. The first NACK or CREDIT ends that.

A CREDIT_REQUEST names a *target*: the cumulative credit that would cover everything it has
to send -- what was granted so far, plus the need (the bytes of its writes not yet cut into
packets) beyond its balance and what speculation still covers, at most 2**31 - 1 ahead of the
grant (the receiver compares 32-bit counts within 2**31). Sending and granting leave
the target where it is; it grows when the need does (a write posted,
speculation ended early, credit dropped above ``max_balance_bdps``), and only then is a
request sent: a few per write, not one per packet. A sender that waits for credit and heard
none for two base RTTs asks again with the same target (a request or a CREDIT was lost); the
receiver answers such a request at once with what it granted (``CreditGrants.on_request``).
A CREDIT above the highest target asked for is none a receiver sends: it is refused (the
sender counts it) rather than believed.

The window the congestion control keeps (NSCC's, for "nscc+rccc") still applies: a packet
needs both room in the window and credit.
"""

from __future__ import annotations

from typing import Final

from mrc_host.wire.messages import CREDIT_MASK

from .config import TransportConfig

_HALF: Final = 1 << 31  # serial-number comparison of 32-bit credit counts


def unwrap_credit(value: int, near: int) -> int:
    """The count whose low 32 bits are ``value``, nearest ``near`` (within 2**31 either way)."""
    delta = (value - near) & CREDIT_MASK
    return near + delta if delta < _HALF else near + delta - (CREDIT_MASK + 1)


class SenderCredit:
    """One sender's credit: balance, speculation, and the target it asked for."""

    def __init__(self, cfg: TransportConfig) -> None:
        p = cfg.rccc
        bdp = cfg.nscc.bdp or cfg.nscc.max_cwnd
        self.spec_bytes = int(p.speculative_bdps * bdp)
        self.max_balance = max(int(p.max_balance_bdps * bdp), p.quantum, cfg.mtu)
        self.reserve = p.reserve_quanta * p.quantum
        self.retry_ns = max(2 * cfg.nscc.base_rtt, 1)
        self.granted = 0  # cumulative credit heard (not wrapped)
        self.balance = 0  # granted, less spent: may be below zero by less than a packet
        self.speculating = True
        self.spec_left = self.spec_bytes  # what speculation may still send
        self.asked = 0  # the highest target requested
        self.last_ns = 0  # the last request sent or CREDIT heard (the retry's clock)
        self.waiting = False  # need left, no credit to send it with (the retry timer runs)
        self.dropped = 0  # credit dropped above the cap, in bytes
        self.retries = 0  # requests sent again with the same target (a request or CREDIT lost)

    def may_send(self) -> bool:
        """A packet may leave now (credit left, or speculation still allows it)."""
        return self.balance > 0 or (self.speculating and self.spec_left > 0)

    def spend(self, size: int) -> None:
        """A new DATA packet of ``size`` payload bytes left (resends and twins spend none: the
        copy they repeat did), or a resend charged again after a last-hop trim."""
        if self.speculating and self.spec_left > 0:
            self.spec_left -= size
        else:
            self.balance -= size

    def on_credit(self, granted: int, now_ns: int) -> bool:
        """A CREDIT: ``granted`` bytes in all (modulo 2**32); a stale one adds nothing. False:
        it grants more than was ever asked for, and is ignored (the caller counts it)."""
        total = unwrap_credit(granted, self.granted)
        if total > self.asked:
            return False
        self.last_ns = now_ns
        self.heard()
        if total <= self.granted:
            return True
        self.balance += total - self.granted
        self.granted = total
        if self.balance > self.max_balance:
            self.dropped += self.balance - self.max_balance
            self.balance = self.max_balance
        return True

    def heard(self) -> None:
        """The receiver answered (a NACK or CREDIT): speculation is over."""
        if self.speculating:
            self.speculating = False
            self.spec_left = 0

    def restart(self) -> None:
        """A write posted on an idle sender: speculation again, less the balance it holds."""
        self.speculating = True
        self.spec_left = max(0, self.spec_bytes - max(self.balance, 0))

    def target(self, need: int) -> int:
        """The cumulative credit that would cover ``need`` more bytes, and the reserve while
        there is any (a loss at the tail is resent at once, not a request's round trip later)."""
        if need <= 0:
            return self.granted
        spec = max(self.spec_left, 0) if self.speculating else 0
        return self.granted + min(max(0, need + self.reserve - spec - self.balance), _HALF - 1)

    def request(self, need: int, now_ns: int) -> int | None:
        """The target to ask for now (not wrapped), or None: it grew, or a wait for credit
        lasted two base RTTs without a CREDIT (asked again, same target). Nothing is booked
        until the request is on its way (:meth:`sent`)."""
        target = self.target(need)
        self.waiting = need > 0 and not self.may_send()
        if target > self.asked:
            return target
        if self.waiting and now_ns >= self.last_ns + self.retry_ns:
            return self.asked
        return None

    def sent(self, target: int, now_ns: int) -> None:
        """A CREDIT_REQUEST for ``target`` (from :meth:`request`) left: the retry's clock starts."""
        if target > self.asked:
            self.asked = target
        else:
            self.retries += 1
        self.last_ns = now_ns

    def deadline(self) -> int | None:
        """When a sender waiting for credit asks again."""
        return self.last_ns + self.retry_ns if self.waiting else None
