"""Tear a whole fabric down in bulk, not one Mininet round trip per link.

Mininet's ``net.stop()`` deletes every link with an ``ip link del`` in a node's shell, one
after another, then stops each switch and host in turn: on 8 planes x 8 T0 x 8 T1 that
is more than a thousand shell round trips and half a minute. When the whole fabric goes,
most of that work is undone by the kernel anyway: a network namespace is deleted with
the last process in it, and with it its veths (and their peers), routes, nftables tables,
qdiscs and the BPF programs attached to them. :func:`stop_fabric` therefore

1. stops every switch process at once, telling the Linux shims that their namespace is
   going (``stop_shim(namespace_going=True)``: they undo nothing; a shim group's process
   gets it once for all its switches) and BMv2 as usual;
2. hangs up every node's shell at once, which ends the node namespaces;
3. deletes, in one ``ip -batch``, the interfaces of switches that live in the root
   namespace (BMv2's ports), the only links no namespace takes along;
4. ends the launcher the Linux shims were forked from (``topologies.shim_launcher``);
5. waits for every shell and closes its pipes, as Mininet's own ``cleanup`` does.

A fabric that only loses one switch (a restart, a fault) never comes here.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import subprocess
from collections.abc import Callable
from typing import Any

from topologies.procs import in_parallel

log = logging.getLogger(__name__)

SHELL_EXIT_TIMEOUT_S = 10.0


def stop_switch_processes(net: Any) -> None:
    """Every switch's process (shim or BMv2) stopped at once; each waits for its own exit."""
    calls: list[Callable[[], Any]] = []
    for sw in net.switches:
        if hasattr(sw, "stop_shim"):
            calls.append(functools.partial(sw.stop_shim, namespace_going=bool(sw.inNamespace)))
        elif hasattr(sw, "stop_switch"):
            calls.append(sw.stop_switch)
    in_parallel(calls)


def root_interfaces(net: Any) -> list[str]:
    """Interfaces of nodes that are not in a namespace of their own (they stay otherwise)."""
    names: list[str] = []
    for node in [*net.switches, *net.hosts]:
        if not getattr(node, "inNamespace", True):
            names += [name for name in node.intfNames() if name != "lo"]
    return names


def stop_fabric(net: Any) -> None:
    """``net.stop()`` for a fabric that goes down whole (see the module docstring)."""
    try:
        stop_switch_processes(net)
    finally:
        end_nodes(net)


def end_nodes(net: Any) -> None:
    """Steps 2-5 of the module docstring: every node's namespace ended, once the switch
    processes in them are stopped."""
    if net.terms:
        net.stopXterms()
    nodes = [*net.switches, *net.hosts, *net.controllers]
    for node in nodes:
        shell = getattr(node, "shell", None)
        if shell is not None and shell.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGHUP)
    names = root_interfaces(net)
    if names:
        # deleting one end of a veth deletes the other: -force goes on past those
        script = "".join(f"link del dev {name}\n" for name in names)
        subprocess.run(["ip", "-force", "-batch", "-"], input=script, text=True, capture_output=True)
    launcher = getattr(net, "shim_launcher", None)
    if launcher is not None:  # every shim it forked is stopped by now
        launcher.stop()
    for node in nodes:
        shell = getattr(node, "shell", None)
        if shell is None:
            continue
        try:
            shell.wait(timeout=SHELL_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.warning("%s: its shell ignored SIGHUP; killing it", node.name)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
        node.cleanup()
