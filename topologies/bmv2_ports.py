"""BMv2 ports leave the switch before their interface goes down and come back once it is up.

simple_switch reads all its ports with one thread that selects over their libpcap handles.
When a port's interface is set down, that thread blocks inside ``pcap_next_ex`` on it and
stays blocked after the interface comes back up: the switch receives nothing on any port,
for good, while its P4Runtime server answers as before -- and a ``port_remove`` issued then
waits forever for the same lock. Mininet's ``link X Y down`` / ``up`` (``ifconfig`` on both
ends) did exactly that: one T0 dead, ``pingall`` 58 % dropped, ``health`` all well.

So every data interface of a BMv2 switch becomes a :class:`Bmv2Port` once the switch starts:
its ``ifconfig down`` first takes the port out of the switch (``port_remove`` over Thrift),
its ``ifconfig up`` puts it back afterwards (``port_add``). The switch never holds a capture
on a down interface, whoever downs it through Mininet (``link``, ``configLinkStatus``, an
``Intf``). An interface downed behind Mininet's back (``ip link``) still wedges the switch;
the controller's data-plane watch then reports it ``not receiving``.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


class Bmv2Port:
    """Mixed into a BMv2 switch's interface (its Mininet ``Intf`` class, whatever it is)."""

    name: str
    node: Any

    def ifconfig(self, *args: str) -> str:
        going_down = args == ("down",)
        if going_down:
            self.node.detach_port(self.name)
        out: str = super().ifconfig(*args)  # type: ignore[misc]
        if args == ("up",):
            self.node.attach_port(self.name)
        return out


_CLASSES: dict[type, type] = {}


def port_class(base: type) -> type:
    """``base`` (an ``Intf`` class) with :class:`Bmv2Port` in front (one class per base)."""
    if base not in _CLASSES:
        _CLASSES[base] = type(f"Bmv2{base.__name__}", (Bmv2Port, base), {})
    return _CLASSES[base]


def hold_ports(switch: Any) -> None:
    """Make every data interface of ``switch`` a :class:`Bmv2Port` (idempotent)."""
    for intf in switch.intfList():
        if intf.name != "lo" and not isinstance(intf, Bmv2Port):
            intf.__class__ = port_class(type(intf))
