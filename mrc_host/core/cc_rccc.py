"""Receiver credits beside NSCC (registered as ``nscc+rccc``) or alone (``rccc``), as UET names them.

A sender of either needs receiver credit for every packet (``credit_tx.py``; the receiver's NIC
grants it, ``credit_rx.py``): the receiver's port is shared by its scheduler, not by how each
sender's window moves, so equal senders into one host get equal shares whatever their RTT and
start. ``nscc+rccc`` keeps NSCC's window for the fabric's queues (ECN, delay); the receiver's
own port is the credits' alone: a trim there (NACK TRIMMED_LASTHOP) neither shrinks the window
nor arms quick adapt (it is speculation's overshoot, not the window's), and its standing queue
is no mark (``NsccParams.lasthop_signal`` off). ``rccc`` keeps a fixed window
of ``max_cwnd``: credits alone, the fabric left to trimming and the EVs' penalties.
"""

from __future__ import annotations

from dataclasses import replace

from .cc_base import register_cc
from .cc_fixed import FixedCc
from .cc_nscc import Nscc
from .config import TransportConfig


class NsccRccc(Nscc):
    name = "nscc+rccc"
    uses_credits = True

    @classmethod
    def from_config(cls, cfg: TransportConfig) -> NsccRccc:
        # (the receiver's port is the credits' to share: no standing-queue mark for it)
        return cls(replace(cfg.nscc, lasthop_signal=False), cfg.experimental)

    def on_trim(self, now_ns: int = 0, lasthop: bool = False) -> None:
        if not lasthop:  # (a trim at the receiver's port: speculation's overshoot, not the window's)
            super().on_trim(now_ns, lasthop)


class Rccc(FixedCc):
    name = "rccc"
    uses_credits = True


# registered by a call, not a decorator: mypyc compiles only undecorated classes natively
register_cc(NsccRccc)
register_cc(Rccc)
