"""How much reordering one sender's loss rules wait out: RACK's reordering window, adapted to
jitter and to the reordering actually seen (recovery.py's rules read it; ``on_delivered``
there feeds it).

The window is the configured floor; 1.5 x the reordering measured on deliveries (how much
earlier than the newest packet already delivered on its plane a delivered packet left,
decaying); SRTT/4, raised a step up to SRTT by each spurious loss and lowered a step after a
clean stretch; the fabric's delay spread, 1.5 x while spurious losses last. A spurious loss
also ends the path-order rule (``path_overtaken``) for good: reordering within a path is
then proven possible.
"""

from __future__ import annotations

from typing import Final

from .config import TransportConfig
from .rtt import RttEstimator

REO_MULT_MAX: Final = 4  # the reordering window grows from SRTT/4 up to SRTT
REO_DECAY_DELIVERIES: Final = 1024  # clean deliveries before it shrinks by one step
REO_EXTENT_DECAY: Final = 1 - 1 / 1024  # per delivery: the reordering seen forgets over many windows
REO_EXTENT_MARGIN: Final = 1.5  # the largest reordering seen so far understates the largest to come


class ReorderWindow:
    """The reordering one sender has seen, and the window its loss rules wait for it."""

    def __init__(self, cfg: TransportConfig, planes: int, rtt: RttEstimator) -> None:
        self.floor_ns = cfg.reorder_window_ns
        self.rtt = rtt
        # SRTT/4 times this, up per spurious loss, down after a clean stretch
        self.mult = 1
        self.path_rule = cfg.path_order_losses and cfg.retires_paths  # (off for good: ``on_spurious``)
        # reordering actually seen, measured without waiting for a spurious loss: how much
        # earlier than the newest packet already delivered on its plane a delivered packet
        # was sent (decaying max); the gap rule's time guard never goes below it
        self.extent = 0.0
        self._clean_deliveries = 0
        self._newest_left = [-1] * planes  # departure time of the newest delivered packet per plane

    def window(self) -> int:
        """How much later a packet must have been sent than an outstanding one for its
        delivery to count against it (the module docstring says of what)."""
        # (asked several times per SACK: two-argument max() compiles to a compare, a longer
        # one to a generic call)
        window = max(self.floor_ns, int(self.extent * REO_EXTENT_MARGIN))
        srtt = self.rtt.srtt_ns
        if srtt is not None:
            window = max(window, int(srtt) * self.mult // REO_MULT_MAX)
            margin = REO_EXTENT_MARGIN if self.mult > 1 else 1.0
            window = max(window, int(self.rtt.fabric_spread * margin))
        return window

    def on_spurious(self) -> None:
        """A loss guess was reordering after all: the window grows a step."""
        self.mult = min(self.mult + 1, REO_MULT_MAX)
        self.path_rule = False
        self._clean_deliveries = 0

    def on_clean_delivery(self) -> None:
        """A packet was delivered with no loss guess proven wrong: after enough of them in a
        row the window shrinks a step."""
        self._clean_deliveries += 1
        if self.mult > 1 and self._clean_deliveries >= REO_DECAY_DELIVERIES:
            self.mult -= 1
            self._clean_deliveries = 0

    def measure(self, plane: int, left_ns: int, known: bool) -> None:
        """A copy that left on ``plane`` at ``left_ns`` was delivered (``known``: surely that
        copy, and when: by its own SACK, as a late copy is SACKed at once; covered by a later
        one, its own was lost)."""
        newest = self._newest_left[plane]
        if left_ns >= newest:
            self._newest_left[plane] = left_ns
            srtt = self.rtt.srtt_ns
            if srtt is not None and self.extent > srtt:
                # a reordering longer than a round trip is a stall, not jitter: in-order
                # deliveries forget it too (one 0.3 s stall kept the window above the RTO)
                self.extent *= REO_EXTENT_DECAY
        elif known:
            self.extent = max(float(newest - left_ns), self.extent * REO_EXTENT_DECAY)
