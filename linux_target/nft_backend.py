"""Fault rules (``port_fault``, ``ingress_fault``) as nftables netdev chains.

One nft table per shim holds a named counter per port and hook (kept for the
life of the shim, so ``drop_reason[2]`` never goes backwards) and, for each
port with a fault, one chain on that interface's egress or ingress hook:
``counter name fault_out_p<N> drop`` for a black hole, or
``numgen random mod 65536 < prob counter name ... drop`` for random loss.
Every change is one ``nft -f -`` batch, which nftables applies atomically.

A second table (family ip6) keeps the switch silent the way a P4 switch is:
no ICMPv6 errors (no route, hop limit, ...) leave the namespace.
"""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import Iterable

from mrc_fabric.fault_tables import LOSS_SCALE, Hook

from .kernel_state import FaultSpec
from .netlink_backend import KernelError

log = logging.getLogger(__name__)

NFT = "nft"


def _chain(hook: Hook, port: int) -> str:
    return f"{'in' if hook == 'ingress' else 'out'}_p{port}"


def counter_name(hook: Hook, port: int) -> str:
    return f"fault_{'in' if hook == 'ingress' else 'out'}_p{port}"


def _quote(ifname: str) -> str:
    if '"' in ifname or "\\" in ifname:
        raise KernelError(f"interface name {ifname!r} cannot be quoted for nft")
    return f'"{ifname}"'


class NftFaults:
    """The shim's nftables tables in its namespace."""

    def __init__(self, table: str) -> None:
        self.table = table

    def run(self, script: str) -> str:
        proc = subprocess.run([NFT, "-f", "-"], input=script, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise KernelError(f"nft refused the change: {proc.stderr.strip()}")
        return proc.stdout

    def start(self, ports: dict[int, str]) -> None:
        """Create the tables fresh (removing any left by an earlier shim of this name)."""
        self.remove()
        lines = [f"add table netdev {self.table}"]
        for port in sorted(ports):
            for hook in ("ingress", "egress"):
                lines.append(f"add counter netdev {self.table} {counter_name(hook, port)}")
        lines += [
            f"add table ip6 {self.table}",
            f"add chain ip6 {self.table} quiet {{ type filter hook output priority 0; }}",
            f"add rule ip6 {self.table} quiet icmpv6 type "
            "{ destination-unreachable, time-exceeded, parameter-problem, packet-too-big } drop",
        ]
        self.run("\n".join(lines) + "\n")

    def remove(self) -> None:
        for family in ("netdev", "ip6"):
            subprocess.run([NFT, "delete", "table", family, self.table], capture_output=True, check=False)

    def change(self, changes: Iterable[tuple[tuple[Hook, int], FaultSpec | None, FaultSpec | None]]) -> None:
        """Apply (key, old, new) fault changes in one atomic batch."""
        lines: list[str] = []
        for (hook, port), old, new in changes:
            chain = _chain(hook, port)
            if old is not None:
                lines.append(f"flush chain netdev {self.table} {chain}")
                if new is None or new.ifname != old.ifname:
                    lines.append(f"delete chain netdev {self.table} {chain}")
            if new is None:
                continue
            if old is None or new.ifname != old.ifname:
                lines.append(
                    f"add chain netdev {self.table} {chain} {{ type filter hook {hook} device "
                    f"{_quote(new.ifname)} priority 0; }}"
                )
            cond = "" if new.loss is None else f"numgen random mod {LOSS_SCALE} < {new.loss} "
            lines.append(
                f"add rule netdev {self.table} {chain} {cond}counter name {counter_name(hook, port)} drop"
            )
        if lines:
            self.run("\n".join(lines) + "\n")

    def counters(self) -> dict[str, tuple[int, int]]:
        """Named fault counters: name → (packets, bytes)."""
        proc = subprocess.run(
            [NFT, "-j", "list", "counters", "table", "netdev", self.table],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            log.warning("nft list counters failed: %s", proc.stderr.strip())
            return {}
        out: dict[str, tuple[int, int]] = {}
        for item in json.loads(proc.stdout).get("nftables", []):
            c = item.get("counter")
            if c:
                out[c["name"]] = (c.get("packets", 0), c.get("bytes", 0))
        return out
