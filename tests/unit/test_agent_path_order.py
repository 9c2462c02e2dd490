"""The live agents keep the gap rule's time guard on every path (``path_order_losses`` off):
software switches and kernels promise no order between the EVs of one path, while mrc-sim's
fabric is one FIFO per path and the core's default takes that for proof."""

from __future__ import annotations

from pathlib import Path

from mrc_host.agent.options import AgentOptions
from mrc_host.core import Mode, TransportConfig


def test_the_agent_keeps_the_time_guard_and_the_core_s_default_does_not() -> None:
    opts = AgentOptions(Path("/nonexistent.json"), Path("/nonexistent.sock"))
    assert opts.transport(Mode.MRC, 0, 4096).path_order_losses is False
    assert TransportConfig().path_order_losses is True
