"""Congestion control behind one small interface, with a registry of named algorithms
(in the manner of aioquic's ``congestion/base.py``): the sender only ever calls the
methods below, and ``TransportConfig.cc_algorithm`` picks the class by name."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar, TypeVar

if TYPE_CHECKING:
    from .config import TransportConfig


class CongestionControl(ABC):
    """A window in bytes, moved by acknowledgements, trims, losses and timeouts."""

    name: ClassVar[str]
    # the sender also needs receiver credit for every packet (UET's RCCC: credit_tx.py)
    uses_credits: ClassVar[bool] = False
    cwnd: float

    @classmethod
    @abstractmethod
    def from_config(cls, cfg: TransportConfig) -> CongestionControl:
        """Build from a transport configuration (each algorithm reads its own parameters)."""

    @abstractmethod
    def on_ack(
        self, acked_bytes: int, rtt_ns: int | None, ecn: bool, now_ns: int, port_wait_ns: int = 0
    ) -> None:
        """Newly acknowledged bytes, with the RTT sample and ECN echo of the SACK's trigger
        (None / False when the SACK carried no believable echo) and how long that packet
        waited for its own NIC port (part of ``rtt_ns``; 0 where the port is not modelled)."""

    def on_trim(self, now_ns: int = 0, lasthop: bool = False) -> None:  # noqa: B027 - optional hook
        """A packet was trimmed (congestion without loss of the headers); ``lasthop``: at the
        receiver's own port (NACK TRIMMED_LASTHOP), not in the fabric."""

    def on_loss(self, lost_bytes: int, now_ns: int) -> None:  # noqa: B027 - optional hook
        """Loss without a trim. MRC reads it as a path failure, which retirement handles,
        so the default leaves the window alone."""

    def on_timeout(self, now_ns: int) -> None:  # noqa: B027 - optional hook
        """The retransmission timer expired."""

    def on_app_limited(self, now_ns: int) -> None:  # noqa: B027 - optional hook
        """The sender was application-limited at ``now_ns``: it had nothing to send (no new
        data, no resend) with room left in the window. Called while that lasts and once more
        when new data ends it, so a rule that judges a period by what was acknowledged can
        tell that the sender, not the network, held the acknowledgements back."""


_CC = TypeVar("_CC", bound=type[CongestionControl])
REGISTRY: dict[str, type[CongestionControl]] = {}


def register_cc(cls: _CC) -> _CC:
    """Class decorator: make ``cls`` selectable by its ``name``."""
    REGISTRY[cls.name] = cls
    return cls


def _load_builtins() -> None:
    from . import cc_fixed, cc_nscc, cc_rccc, cc_window  # noqa: F401 - register the built-in algorithms


def cc_names() -> list[str]:
    """Every selectable algorithm name (the built-ins and anything registered since)."""
    _load_builtins()
    return sorted(REGISTRY)


def create_cc(cfg: TransportConfig) -> CongestionControl:
    """The congestion control ``cfg.cc_algorithm`` names (ValueError lists the known ones)."""
    _load_builtins()
    cls = REGISTRY.get(cfg.cc_algorithm)
    if cls is None:
        raise ValueError(f"cc_algorithm {cfg.cc_algorithm!r} unknown; known: {', '.join(sorted(REGISTRY))}")
    return cls.from_config(cfg)
