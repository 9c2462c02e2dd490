"""Mininet's rate-limited link (``TCLink``) with HTB's quantum written out.

Why: TCLink's HTB class leaves the quantum to the kernel (rate / r2q), and above 16 Mbit/s
the kernel clamps it and says so, "sch_htb: quantum of class 50001 is big. Consider r2q
change", which Mininet prints as ``*** Error:`` once per interface — 32 lines on the default
fabric, all about a setting that changes nothing. :class:`RateLink` asks for the same quantum
the kernel settles on (``linux_target.egress.htb_quantum``), so the start is quiet and the
queueing identical.
"""

from __future__ import annotations

from typing import Any

from mininet.link import TCIntf, TCLink

from linux_target.egress import htb_quantum

HTB_CLASS = "classid 5:1 htb rate"  # the class line of TCIntf.bwCmds' HTB


class RateIntf(TCIntf):  # type: ignore[misc]  # Mininet is untyped
    """A TCIntf whose HTB class carries an explicit quantum."""

    def bwCmds(self, bw: float | None = None, **params: Any) -> tuple[list[str], str]:
        cmds, parent = super().bwCmds(bw=bw, **params)
        if bw:
            quantum = f" quantum {htb_quantum(bw * 1e6)}"
            cmds = [c + quantum if HTB_CLASS in c else c for c in cmds]
        return cmds, parent


class RateLink(TCLink):  # type: ignore[misc]
    """``TCLink`` with :class:`RateIntf` at both ends (``bw=`` in Mbit/s, as TCLink)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("cls1", RateIntf)
        kwargs.setdefault("cls2", RateIntf)
        super().__init__(*args, **kwargs)
