"""The fabric's topology model: planes, switches, hosts, links, port numbers and MACs.

One value of :class:`Topology` describes everything the controller, the route
compiler, the Mininet script and the host agents must agree on. The topology
script writes it to ``<run_dir>/topology.json``; every other component loads
that file (:meth:`Topology.load`), which validates it and names the bad field
in its error (``links[3].a.port: port 0 is reserved``).

Deterministic numbering used by :func:`build_clos` (documented in docs/controller.md):

- names: T0 ``{prefix}t0p{plane}n{index}``, T1 ``{prefix}t1p{plane}n{index}``,
  host ``{prefix}h{host}``; interfaces ``{node}-eth{port}``.
- hosts are numbered globally; host ``h`` sits under T0 ``h // hosts_per_t0`` in
  every plane (the same T0 index in each plane), NIC port of plane ``p`` is
  ``{host}-eth{p}`` (host-side port number = plane).
- T0 ports: ``1..hosts_per_t0`` go down to its hosts (``1 + h % hosts_per_t0``),
  ``hosts_per_t0 + 1 + s`` goes up to T1 ``s``. T1 ports: ``1 + l`` goes down to T0
  ``l``. Port 0 is reserved (Mininet's loopback-ish port and P4's "no port").
- device ids: 1, 2, ... in the order plane, T0s then T1s.
- MACs: ``02:00:`` + uSID (16 bits) + port (16 bits); a host NIC port uses its
  host uSID and port 0, so every MAC in the fabric is unique and readable.
"""

from __future__ import annotations

import enum
import ipaddress
import json
import re
from dataclasses import asdict, dataclass, field
from ipaddress import IPv6Network
from pathlib import Path
from typing import Any

from mrc_fabric.addressing import (
    DEFAULT_BLOCK,
    MAX_INDEX,
    MAX_PLANES,
    AddressingError,
    host_usid,
    nic_address,
    parse_block,
    t0_usid,
    t1_usid,
)

IFNAMSIZ = 15  # Linux interface names are at most 15 characters
MAX_PORT = 511  # ports are 9 bits in the P4 program; 511 is the v1model drop port
FORMAT_VERSION = 1


class TopologyError(ValueError):
    """A topology that does not hold together; the message starts with the bad field's path."""


class Role(enum.StrEnum):
    T0 = "t0"
    T1 = "t1"


class Target(enum.StrEnum):
    BMV2 = "bmv2"
    LINUX = "linux"


def port_mac(usid: int, port: int) -> str:
    """MAC of a port: 02:00 + uSID + port number, locally administered and unique."""
    value = (0x0200 << 32) | (usid << 16) | port
    return ":".join(f"{(value >> s) & 0xFF:02x}" for s in range(40, -8, -8))


@dataclass
class NicPort:
    """One NIC port of a host: its plane, interface and the T0 port it plugs into."""

    plane: int
    ifname: str
    mac: str
    address: str  # the NIC port's IPv6 address (inner source/destination)
    t0: str  # name of the T0 switch of this plane
    t0_port: int  # port number on that T0
    t0_mac: str  # MAC of that T0 port (the next hop's MAC for frames the host sends)


@dataclass
class Host:
    name: str
    index: int  # global host number: the index of its host uSIDs
    t0_index: int  # the T0 index it sits under (in every plane)
    ports: list[NicPort] = field(default_factory=list)

    def port(self, plane: int) -> NicPort:
        for p in self.ports:
            if p.plane == plane:
                return p
        raise KeyError(f"host {self.name} has no NIC port in plane {plane}")


@dataclass
class Switch:
    name: str
    role: Role
    plane: int
    index: int
    usid: int
    device_id: int
    p4rt_address: str = ""  # "unix:/path" or "host:port"; filled in when the switch runs
    target: Target = Target.LINUX


@dataclass
class LinkEnd:
    node: str
    port: int
    mac: str
    ifname: str


@dataclass
class Link:
    """A cable. By convention ``a`` is the lower tier (host below T0, T0 below T1)."""

    a: LinkEnd
    b: LinkEnd

    @property
    def name(self) -> str:
        return f"{self.a.node}-{self.b.node}"


@dataclass
class Topology:
    planes: int
    t0_per_plane: int
    t1_per_plane: int
    hosts_per_t0: int
    block: IPv6Network = DEFAULT_BLOCK
    switches: list[Switch] = field(default_factory=list)
    hosts: list[Host] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._reindex()

    # -- lookups ---------------------------------------------------------------------------------
    def _reindex(self) -> None:
        self._switch_by_name = {s.name: s for s in self.switches}
        self._host_by_name = {h.name: h for h in self.hosts}
        self._peer: dict[tuple[str, int], LinkEnd] = {}
        self._link_by_end: dict[tuple[str, int], Link] = {}
        for link in self.links:
            self._peer[(link.a.node, link.a.port)] = link.b
            self._peer[(link.b.node, link.b.port)] = link.a
            self._link_by_end[(link.a.node, link.a.port)] = link
            self._link_by_end[(link.b.node, link.b.port)] = link

    def switch(self, name: str) -> Switch:
        try:
            return self._switch_by_name[name]
        except KeyError:
            raise KeyError(f"no switch named {name!r}") from None

    def host(self, name: str) -> Host:
        try:
            return self._host_by_name[name]
        except KeyError:
            raise KeyError(f"no host named {name!r}") from None

    def has_switch(self, name: str) -> bool:
        return name in self._switch_by_name

    def has_host(self, name: str) -> bool:
        return name in self._host_by_name

    def t0(self, plane: int, index: int) -> Switch:
        return self._by_role(Role.T0, plane, index)

    def t1(self, plane: int, index: int) -> Switch:
        return self._by_role(Role.T1, plane, index)

    def _by_role(self, role: Role, plane: int, index: int) -> Switch:
        for s in self.switches:
            if s.role == role and s.plane == plane and s.index == index:
                return s
        raise KeyError(f"no {role.value} switch with plane {plane} index {index}")

    def peer(self, node: str, port: int) -> LinkEnd | None:
        """The far end of the cable plugged into ``node``'s ``port``."""
        return self._peer.get((node, port))

    def link_at(self, node: str, port: int) -> Link | None:
        return self._link_by_end.get((node, port))

    def find_link(self, ident: str) -> Link:
        """A link by name ``a-b`` (either order) or by one end ``node:port``."""
        if ":" in ident:
            node, _, port = ident.rpartition(":")
            if port.isdigit() and (link := self.link_at(node, int(port))) is not None:
                return link
        for link in self.links:
            if ident in (link.name, f"{link.b.node}-{link.a.node}"):
                return link
        raise KeyError(f"no link {ident!r}")

    def ports_of(self, node: str) -> list[LinkEnd]:
        ends = [lk.a for lk in self.links if lk.a.node == node] + [
            lk.b for lk in self.links if lk.b.node == node
        ]
        return sorted(ends, key=lambda e: e.port)

    def t0_hosts(self, plane: int, t0_index: int) -> list[Host]:
        return [h for h in self.hosts if h.t0_index == t0_index and any(p.plane == plane for p in h.ports)]

    # -- JSON --------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "block": str(self.block),
            "planes": self.planes,
            "t0_per_plane": self.t0_per_plane,
            "t1_per_plane": self.t1_per_plane,
            "hosts_per_t0": self.hosts_per_t0,
            "switches": [
                {**asdict(s), "role": s.role.value, "target": s.target.value, "usid": f"{s.usid:04x}"}
                for s in self.switches
            ],
            "hosts": [asdict(h) for h in self.hosts],
            "links": [asdict(lk) for lk in self.links],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def save(self, path: Path | str) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def from_dict(cls, data: Any) -> Topology:
        """Parse and validate; every error names the field it is about."""
        topo = _parse(data)
        validate(topo)
        return topo

    @classmethod
    def from_json(cls, text: str) -> Topology:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TopologyError(f"<json>: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def load(cls, path: Path | str) -> Topology:
        return cls.from_json(Path(path).read_text())


# -- parsing -----------------------------------------------------------------------------------------
def _get(obj: Any, key: str, path: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(obj, dict):
        raise TopologyError(f"{path}: expected an object")
    if key not in obj:
        raise TopologyError(f"{path}.{key}: missing" if path else f"{key}: missing")
    value = obj[key]
    where = f"{path}.{key}" if path else key
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TopologyError(f"{where}: expected an integer, got {value!r}")
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise TopologyError(f"{where}: expected {names}, got {value!r}")
    return value


def _list(obj: Any, key: str) -> list[Any]:
    value: list[Any] = _get(obj, key, "", list)
    return value


def _parse_end(d: Any, path: str) -> LinkEnd:
    return LinkEnd(
        node=_get(d, "node", path, str),
        port=_get(d, "port", path, int),
        mac=_get(d, "mac", path, str),
        ifname=_get(d, "ifname", path, str),
    )


def _parse(data: Any) -> Topology:
    if not isinstance(data, dict):
        raise TopologyError("<root>: expected a JSON object")
    fmt = data.get("format", FORMAT_VERSION)
    if fmt != FORMAT_VERSION:
        raise TopologyError(f"format: version {fmt!r} is not supported (expected {FORMAT_VERSION})")
    try:
        block = parse_block(_get(data, "block", "", str))
    except AddressingError as exc:
        raise TopologyError(f"block: {exc}") from exc
    switches = []
    for i, d in enumerate(_list(data, "switches")):
        p = f"switches[{i}]"
        role = _get(d, "role", p, str)
        if role not in {r.value for r in Role}:
            raise TopologyError(f"{p}.role: {role!r} is not one of t0, t1")
        target = d.get("target", Target.LINUX.value)
        if target not in {t.value for t in Target}:
            raise TopologyError(f"{p}.target: {target!r} is not one of bmv2, linux")
        usid_text = _get(d, "usid", p, str)
        try:
            usid = int(usid_text, 16)
        except ValueError:
            raise TopologyError(f"{p}.usid: {usid_text!r} is not a hex uSID") from None
        switches.append(
            Switch(
                name=_get(d, "name", p, str),
                role=Role(role),
                plane=_get(d, "plane", p, int),
                index=_get(d, "index", p, int),
                usid=usid,
                device_id=_get(d, "device_id", p, int),
                p4rt_address=d.get("p4rt_address", "") or "",
                target=Target(target),
            )
        )
    hosts = []
    for i, d in enumerate(_list(data, "hosts")):
        p = f"hosts[{i}]"
        ports = []
        for j, pd in enumerate(_get(d, "ports", p, list)):
            pp = f"{p}.ports[{j}]"
            ports.append(
                NicPort(
                    plane=_get(pd, "plane", pp, int),
                    ifname=_get(pd, "ifname", pp, str),
                    mac=_get(pd, "mac", pp, str),
                    address=_get(pd, "address", pp, str),
                    t0=_get(pd, "t0", pp, str),
                    t0_port=_get(pd, "t0_port", pp, int),
                    t0_mac=_get(pd, "t0_mac", pp, str),
                )
            )
        hosts.append(
            Host(
                name=_get(d, "name", p, str),
                index=_get(d, "index", p, int),
                t0_index=_get(d, "t0_index", p, int),
                ports=ports,
            )
        )
    links = []
    for i, d in enumerate(_list(data, "links")):
        p = f"links[{i}]"
        links.append(
            Link(_parse_end(_get(d, "a", p, dict), f"{p}.a"), _parse_end(_get(d, "b", p, dict), f"{p}.b"))
        )
    return Topology(
        planes=_get(data, "planes", "", int),
        t0_per_plane=_get(data, "t0_per_plane", "", int),
        t1_per_plane=_get(data, "t1_per_plane", "", int),
        hosts_per_t0=_get(data, "hosts_per_t0", "", int),
        block=block,
        switches=switches,
        hosts=hosts,
        links=links,
    )


# -- validation --------------------------------------------------------------------------------------
_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9_]+$")


def _check_mac(mac: str, path: str) -> None:
    if not _MAC_RE.match(mac):
        raise TopologyError(f"{path}: {mac!r} is not a lower-case MAC address aa:bb:cc:dd:ee:ff")


def _check_ifname(name: str, path: str) -> None:
    if not name or len(name) > IFNAMSIZ:
        raise TopologyError(f"{path}: interface name {name!r} must have 1..{IFNAMSIZ} characters")


def validate(topo: Topology) -> None:
    """Check that the topology is one consistent multi-plane two-tier Clos."""
    _check_sizes(topo)
    names: dict[str, str] = {}  # node name -> where it was declared
    _check_switches(topo, names)
    _check_hosts(topo, names)
    _check_links(topo, names)
    _check_nic_cabling(topo)
    _check_full_mesh(topo)


def _check_sizes(topo: Topology) -> None:
    for key in ("planes", "t0_per_plane", "t1_per_plane", "hosts_per_t0"):
        if getattr(topo, key) < 1:
            raise TopologyError(f"{key}: must be at least 1, got {getattr(topo, key)}")
    if topo.planes > MAX_PLANES:
        raise TopologyError(
            f"planes: at most {MAX_PLANES} planes fit the uSID plane field, got {topo.planes}"
        )
    for key in ("t0_per_plane", "t1_per_plane"):
        if getattr(topo, key) > MAX_INDEX:
            raise TopologyError(f"{key}: at most {MAX_INDEX} fit the uSID index field")


def _claim_name(where: str, name: str, names: dict[str, str]) -> None:
    """Records that ``where`` (``switches[3]``) uses ``name``: a node name is a valid word
    and unique across switches and hosts, as Mininet and the agents address nodes by it."""
    if not _NAME_RE.match(name):
        raise TopologyError(f"{where}.name: {name!r} must be letters, digits or '_'")
    if name in names:
        raise TopologyError(f"{where}.name: {name!r} is already used by {names[name]}")
    names[name] = where


def _check_switches(topo: Topology, names: dict[str, str]) -> None:
    device_ids: dict[int, str] = {}
    usids: dict[int, str] = {}
    for i, s in enumerate(topo.switches):
        p = f"switches[{i}]"
        _claim_name(p, s.name, names)
        if not 0 <= s.plane < topo.planes:
            raise TopologyError(f"{p}.plane: {s.plane} outside 0..{topo.planes - 1}")
        limit = topo.t0_per_plane if s.role == Role.T0 else topo.t1_per_plane
        if not 0 <= s.index < limit:
            raise TopologyError(f"{p}.index: {s.index} outside 0..{limit - 1} for a {s.role.value}")
        expected = (t0_usid if s.role == Role.T0 else t1_usid)(s.plane, s.index)
        if s.usid != expected:
            raise TopologyError(
                f"{p}.usid: {s.usid:04x} does not match role/plane/index (expected {expected:04x})"
            )
        if s.usid in usids:
            raise TopologyError(f"{p}.usid: {s.usid:04x} is already used by {usids[s.usid]}")
        usids[s.usid] = p
        if s.device_id < 1:
            raise TopologyError(f"{p}.device_id: must be at least 1, got {s.device_id}")
        if s.device_id in device_ids:
            raise TopologyError(f"{p}.device_id: {s.device_id} is already used by {device_ids[s.device_id]}")
        device_ids[s.device_id] = p
    want = topo.planes * (topo.t0_per_plane + topo.t1_per_plane)
    if len(topo.switches) != want:
        raise TopologyError(
            f"switches: expected {want} switches (planes x (T0 + T1)), got {len(topo.switches)}"
        )


def _check_hosts(topo: Topology, names: dict[str, str]) -> None:
    host_indices: dict[int, str] = {}
    for i, h in enumerate(topo.hosts):
        p = f"hosts[{i}]"
        _claim_name(p, h.name, names)
        if not 0 <= h.index < MAX_INDEX:
            raise TopologyError(f"{p}.index: {h.index} outside 0..{MAX_INDEX - 1}")
        if h.index in host_indices:
            raise TopologyError(f"{p}.index: {h.index} is already used by {host_indices[h.index]}")
        host_indices[h.index] = p
        if not 0 <= h.t0_index < topo.t0_per_plane:
            raise TopologyError(f"{p}.t0_index: {h.t0_index} outside 0..{topo.t0_per_plane - 1}")
        planes_seen: set[int] = set()
        for j, port in enumerate(h.ports):
            pp = f"{p}.ports[{j}]"
            if not 0 <= port.plane < topo.planes:
                raise TopologyError(f"{pp}.plane: {port.plane} outside 0..{topo.planes - 1}")
            if port.plane in planes_seen:
                raise TopologyError(f"{pp}.plane: a second NIC port in plane {port.plane}")
            _check_nic_port(topo, h, port, pp)
            planes_seen.add(port.plane)


def _check_nic_port(topo: Topology, h: Host, port: NicPort, pp: str) -> None:
    _check_ifname(port.ifname, f"{pp}.ifname")
    _check_mac(port.mac, f"{pp}.mac")
    _check_mac(port.t0_mac, f"{pp}.t0_mac")
    try:
        addr = ipaddress.IPv6Address(port.address)
    except ValueError:
        raise TopologyError(f"{pp}.address: {port.address!r} is not an IPv6 address") from None
    if addr != nic_address(port.plane, h.index, topo.block):
        raise TopologyError(
            f"{pp}.address: {addr} is not the plan's {nic_address(port.plane, h.index, topo.block)}"
        )
    t0 = topo._switch_by_name.get(port.t0)
    if t0 is None or t0.role != Role.T0:
        raise TopologyError(f"{pp}.t0: {port.t0!r} is not a T0 switch")
    if t0.plane != port.plane or t0.index != h.t0_index:
        raise TopologyError(f"{pp}.t0: {port.t0} is not T0 {h.t0_index} of plane {port.plane}")


def _check_links(topo: Topology, names: dict[str, str]) -> None:
    ends: dict[tuple[str, int], str] = {}
    macs: dict[str, str] = {}
    ifnames: dict[str, str] = {}
    for i, link in enumerate(topo.links):
        for side in ("a", "b"):
            end: LinkEnd = getattr(link, side)
            p = f"links[{i}].{side}"
            if end.node not in names:
                raise TopologyError(f"{p}.node: {end.node!r} is neither a switch nor a host")
            is_switch = end.node in topo._switch_by_name
            if is_switch and end.port == 0:
                raise TopologyError(f"{p}.port: port 0 is reserved")
            if not 0 <= end.port <= MAX_PORT - 1:
                raise TopologyError(f"{p}.port: {end.port} outside 0..{MAX_PORT - 1}")
            if (end.node, end.port) in ends:
                raise TopologyError(
                    f"{p}.port: {end.node} port {end.port} is already cabled in {ends[(end.node, end.port)]}"
                )
            ends[(end.node, end.port)] = f"links[{i}]"
            _check_mac(end.mac, f"{p}.mac")
            if end.mac in macs:
                raise TopologyError(f"{p}.mac: {end.mac} is already used by {macs[end.mac]}")
            macs[end.mac] = p
            _check_ifname(end.ifname, f"{p}.ifname")
            if end.ifname in ifnames:
                raise TopologyError(f"{p}.ifname: {end.ifname} is already used by {ifnames[end.ifname]}")
            ifnames[end.ifname] = p
        _check_link_roles(topo, link, f"links[{i}]")


def _check_nic_cabling(topo: Topology) -> None:
    # Every NIC port must be cabled to the T0 port it names, with matching MACs.
    for i, h in enumerate(topo.hosts):
        for j, port in enumerate(h.ports):
            pp = f"hosts[{i}].ports[{j}]"
            peer = topo.peer(port.t0, port.t0_port)
            if peer is None or peer.node != h.name:
                raise TopologyError(f"{pp}.t0_port: {port.t0} port {port.t0_port} is not cabled to {h.name}")
            if peer.mac != port.mac or peer.ifname != port.ifname:
                raise TopologyError(f"{pp}.mac: does not match the link end {peer.ifname} {peer.mac}")
            t0_end = topo.peer(h.name, peer.port)
            if t0_end is None or t0_end.mac != port.t0_mac:
                raise TopologyError(
                    f"{pp}.t0_mac: {port.t0_mac} is not the MAC of {port.t0} port {port.t0_port}"
                )


def _check_full_mesh(topo: Topology) -> None:
    # Full mesh inside each plane: every T0 has exactly one link to every T1 of its plane.
    for s in topo.switches:
        if s.role != Role.T0:
            continue
        uplinks = {
            topo.switch(e.node).index
            for e in (topo.peer(s.name, x.port) for x in topo.ports_of(s.name))
            if e is not None and e.node in topo._switch_by_name
        }
        if uplinks != set(range(topo.t1_per_plane)):
            missing = sorted(set(range(topo.t1_per_plane)) - uplinks)
            raise TopologyError(
                f"links: T0 {s.name} is not linked to T1 indices {missing} of plane {s.plane}"
            )


def _check_link_roles(topo: Topology, link: Link, path: str) -> None:
    a_sw = topo._switch_by_name.get(link.a.node)
    b_sw = topo._switch_by_name.get(link.b.node)
    if b_sw is None:
        raise TopologyError(f"{path}.b.node: {link.b.node} must be a switch (a is the lower tier)")
    if a_sw is None:
        if b_sw.role != Role.T0:
            raise TopologyError(f"{path}.b.node: a host must be cabled to a T0, not {b_sw.name}")
        return
    if a_sw.role != Role.T0 or b_sw.role != Role.T1:
        raise TopologyError(
            f"{path}: switch links go from a T0 (a) to a T1 (b), got {a_sw.name} -> {b_sw.name}"
        )
    if a_sw.plane != b_sw.plane:
        raise TopologyError(
            f"{path}: {a_sw.name} (plane {a_sw.plane}) and {b_sw.name} (plane {b_sw.plane}) "
            "are in different planes"
        )


# -- builder -----------------------------------------------------------------------------------------
def switch_name(prefix: str, role: Role, plane: int, index: int) -> str:
    return f"{prefix}{role.value}p{plane}n{index}"


def host_name(prefix: str, index: int) -> str:
    return f"{prefix}h{index}"


def build_clos(
    planes: int,
    t0_per_plane: int,
    t1_per_plane: int,
    hosts_per_t0: int,
    block: IPv6Network = DEFAULT_BLOCK,
    prefix: str = "",
    target: Target | str = Target.LINUX,
    p4rt_address_format: str = "",
) -> Topology:
    """A multi-plane two-tier Clos with deterministic names, ports and MACs (see the module doc).

    ``p4rt_address_format`` may use ``{name}`` and ``{device_id}``, e.g.
    ``"unix:/run/x/{name}.sock"``; empty leaves addresses to be filled in at start.
    """
    tgt = Target(target)
    switches: list[Switch] = []
    device_id = 1
    for p in range(planes):
        for role, count, usid_fn in ((Role.T0, t0_per_plane, t0_usid), (Role.T1, t1_per_plane, t1_usid)):
            for i in range(count):
                name = switch_name(prefix, role, p, i)
                addr = (
                    p4rt_address_format.format(name=name, device_id=device_id) if p4rt_address_format else ""
                )
                switches.append(Switch(name, role, p, i, usid_fn(p, i), device_id, addr, tgt))
                device_id += 1

    def end(node: str, usid: int, port: int) -> LinkEnd:
        return LinkEnd(node, port, port_mac(usid, port), f"{node}-eth{port}")

    hosts: list[Host] = []
    links: list[Link] = []
    for h in range(t0_per_plane * hosts_per_t0):
        name = host_name(prefix, h)
        t0_index = h // hosts_per_t0
        host = Host(name, h, t0_index)
        for p in range(planes):
            t0 = switch_name(prefix, Role.T0, p, t0_index)
            t0_port = 1 + h % hosts_per_t0
            a = LinkEnd(name, p, port_mac(host_usid(p, h), 0), f"{name}-eth{p}")
            b = end(t0, t0_usid(p, t0_index), t0_port)
            links.append(Link(a, b))
            host.ports.append(NicPort(p, a.ifname, a.mac, str(nic_address(p, h, block)), t0, t0_port, b.mac))
        hosts.append(host)
    for p in range(planes):
        for t0_index in range(t0_per_plane):
            for s in range(t1_per_plane):
                a = end(switch_name(prefix, Role.T0, p, t0_index), t0_usid(p, t0_index), hosts_per_t0 + 1 + s)
                b = end(switch_name(prefix, Role.T1, p, s), t1_usid(p, s), 1 + t0_index)
                links.append(Link(a, b))
    topo = Topology(planes, t0_per_plane, t1_per_plane, hosts_per_t0, block, switches, hosts, links)
    validate(topo)
    return topo


__all__ = [
    "Host",
    "Link",
    "LinkEnd",
    "NicPort",
    "Role",
    "Switch",
    "Target",
    "Topology",
    "TopologyError",
    "build_clos",
    "port_mac",
    "validate",
]
