"""Build hook: compile the typed hot modules with mypyc (``pip install -e '.[dev]'`` does it).

Everything else about the package lives in pyproject.toml. The modules below are plain,
fully typed Python that mypyc turns into C extensions next to their sources; the
``.py`` files stay the source of truth and the fallback:

- ``MRC_PURE_PYTHON=1`` at build time skips compilation (nothing but Python is installed);
- ``MRC_PURE_PYTHON=1`` at run time makes ``mrc_host`` import the ``.py`` sources even
  where the extensions were built (see ``mrc_host/__init__.py``), which is how the tests
  run against both.

docs/simulator.md ("Speed") says what is compiled and why the rest is not.
"""

from __future__ import annotations

import os

from setuptools import setup

# The per-packet path of the simulator and the agent: the sans-I/O core (except its EV
# state table, whose exception subclasses a builtin, and the EV profile expansion, which runs
# once per connection; tests/unit/test_compiled_modules.py holds every other core module
# here), the wire codec and its messages, the
# simulator's event loop, fabric and network, and the agent's packet path (the loop, the
# peer binding that runs each connection's core, connections, paths, payload check, ports).
# The rest of the agent (control socket, commands, CLI, EV profiles, a transfer's life,
# which runs once per 1 MiB chunk) runs as Python.
COMPILED = [
    "mrc_host/core/__init__.py",
    "mrc_host/core/ack_echo.py",
    "mrc_host/core/ack_effects.py",
    "mrc_host/core/acks.py",
    "mrc_host/core/actions.py",
    "mrc_host/core/blame.py",
    "mrc_host/core/cc_base.py",
    "mrc_host/core/cc_fixed.py",
    "mrc_host/core/cc_nscc.py",
    "mrc_host/core/cc_rccc.py",
    "mrc_host/core/cc_window.py",
    "mrc_host/core/config.py",
    "mrc_host/core/control.py",
    "mrc_host/core/counters.py",
    "mrc_host/core/credit_rx.py",
    "mrc_host/core/credit_tx.py",
    "mrc_host/core/endpoint.py",
    "mrc_host/core/ev_draw.py",
    "mrc_host/core/ev_entries.py",
    "mrc_host/core/ev_heat.py",
    "mrc_host/core/ev_probe.py",
    "mrc_host/core/ev_scouts.py",
    "mrc_host/core/ev_shared.py",
    "mrc_host/core/ev_table.py",
    "mrc_host/core/evset.py",
    "mrc_host/core/loss_response.py",
    "mrc_host/core/nic_clock.py",
    "mrc_host/core/packet_state.py",
    "mrc_host/core/path_health.py",
    "mrc_host/core/plane_delays.py",
    "mrc_host/core/plane_passing.py",
    "mrc_host/core/plane_queues.py",
    "mrc_host/core/path_watch.py",
    "mrc_host/core/plane_watch.py",
    "mrc_host/core/psn.py",
    "mrc_host/core/rangeset.py",
    "mrc_host/core/receiver.py",
    "mrc_host/core/records.py",
    "mrc_host/core/recovery.py",
    "mrc_host/core/region.py",
    "mrc_host/core/reorder.py",
    "mrc_host/core/rtt.py",
    "mrc_host/core/sack_by_seq.py",
    "mrc_host/core/sender.py",
    "mrc_host/core/service_gap.py",
    "mrc_host/core/sent.py",
    "mrc_host/core/writes.py",
    "mrc_host/agent/agent.py",
    "mrc_host/agent/connection.py",
    "mrc_host/agent/denies.py",
    "mrc_host/agent/handshake.py",
    "mrc_host/agent/inbound.py",
    "mrc_host/agent/paths.py",
    "mrc_host/agent/payload.py",
    "mrc_host/agent/peers.py",
    "mrc_host/agent/ports.py",
    "mrc_host/agent/rings.py",
    "mrc_host/agent/transfer.py",
    "mrc_host/wire/codec.py",
    "mrc_host/wire/header_check.py",
    "mrc_host/wire/messages.py",
    "mrc_host/wire/virtual_payload.py",
    "mrc_host/sim/draws.py",
    "mrc_host/sim/engine.py",
    "mrc_host/sim/fabric.py",
    "mrc_host/sim/fault_state.py",
    "mrc_host/sim/jsonout.py",
    "mrc_host/sim/network.py",
]


def ext_modules() -> list[object]:
    if os.environ.get("MRC_PURE_PYTHON", "") not in ("", "0"):
        return []
    from mypyc.build import mypycify

    # pip builds in an isolated environment without numpy or scapy: their names are Any there,
    # which the project's strict mypy settings (pyproject.toml) refuse, so mypyc reads no
    # config file (`make lint` holds these modules to --strict with the real libraries)
    flags = ["--config-file=", "--ignore-missing-imports", "--python-version=3.11"]
    return list(mypycify([*flags, *COMPILED], opt_level="3"))


setup(ext_modules=ext_modules())
