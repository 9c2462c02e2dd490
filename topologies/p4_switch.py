"""What every P4Runtime-programmed switch node shares, whatever its data plane.

Both node classes (BMv2 and the Linux SRv6 shim) number their data ports the same
way, so the controller can address a port by number on either target.
"""

from __future__ import annotations

from typing import Any

from mininet.node import Switch


class P4PortsSwitch(Switch):  # type: ignore[misc]  # Mininet is untyped
    """A Mininet switch whose data ports are P4 port numbers (Mininet's own numbering)."""

    def port_map(self) -> dict[int, str]:
        """P4 port number → interface name, for every data interface of the switch."""
        return {port: intf.name for intf, port in self.ports.items() if intf.name != "lo"}

    def port_of(self, intf: Any) -> int:
        """P4 port number of an interface given by name or Mininet Intf."""
        name = intf if isinstance(intf, str) else intf.name
        for port, ifname in self.port_map().items():
            if ifname == name:
                return port
        raise KeyError(f"{name} is not an interface of switch {self.name}")
