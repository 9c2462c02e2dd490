"""Mininet node for a Linux-kernel SRv6 switch driven by a P4Runtime shim.

Interface for the controller and topology code::

    from topologies.linux_switch import LinuxSrv6Switch
    sw = net.addSwitch("ls1", cls=LinuxSrv6Switch, device_id=1, run_dir="runs/x")
    ...                      # add links; Mininet numbers the switch's ports 1, 2, ... in link order
    net.start()              # start(): sysctls + shim, returns once the shim answers gRPC
    sw.p4rt_address          # "unix:/abs/run_dir/ls1.p4rt.sock" (reachable from any namespace)
    sw.device_id             # P4Runtime device id
    sw.port_of("ls1-eth2")   # P4 port number of an interface (name or Intf); sw.port_map() for all
    sw.shim_log              # <run_dir>/<name>.shim.log
    sw.restart_shim()        # kill and restart the shim: the kernel state is wiped, re-install entries
    sw.set_port_rate(2, 5)   # slow port 2 to 5 Mbit/s on purpose (HTB and the virtual queue)
    net.stop()               # stop(): SIGTERM to the shim by PID (SIGKILL after 5 s), socket removed
    sw.stop_shim(namespace_going=True)  # the fabric goes down (topologies.teardown): SIGUSR1,
                             # the shim leaves the namespace's state to go with it

The switch lives in its own network namespace (``inNamespace=True``); the shim
runs inside it and programs that namespace only: seg6local End next-csid for
``my_usid``, /48 routes for ``usid_route``, nftables for faults, and on every
port the egress model (linux_target/egress.py: HTB at the link's rate with a
high-priority class, and the eBPF program that marks ECN, trims and tail-drops
as ``port_policy`` says). A port's rate is its link's ``bw`` (Mininet TCLink,
Mbit/s); a port without one is not rate limited. The shim replaces TCLink's own
qdisc on the switch side with the same rate. Forwarding and seg6 sysctls are
set by the shim before it starts serving, so a switch that answers gRPC is
ready to forward; the shim removes its qdiscs and BPF programs when it stops.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from linux_target.p4rt_client import wait_until_serving
from mrc_fabric.time_scale import TimeLimitExceeded, scaled
from topologies.node_cmd import ip_batch
from topologies.p4_switch import P4PortsSwitch
from topologies.procs import terminate
from topologies.shim_groups import GroupError, MemberShim, SwitchGroup
from topologies.shim_launcher import LaunchedShim, LauncherError, ShimLauncher

SHIM_START_TIMEOUT = 20.0
SHIM_STOP_TIMEOUT = 5.0


class ShimStartError(RuntimeError):
    """The shim did not come up; the message carries the end of its log."""


class LinuxSrv6Switch(P4PortsSwitch):
    """A Mininet switch whose data plane is the Linux kernel, programmed over P4Runtime."""

    def __init__(
        self,
        name: str,
        device_id: int,
        run_dir: str | os.PathLike[str] = "runs",
        start_timeout: float | None = None,  # None: SHIM_START_TIMEOUT scaled to this machine
        buffer_bytes: int | None = None,
        egress_model: bool = True,
        launcher: ShimLauncher | None = None,
        group: SwitchGroup | None = None,
        **params: Any,
    ) -> None:
        # Always its own namespace: Mininet.addSwitch passes inNamespace=False by default, and a
        # shim in the root namespace would reprogram the machine's own routes and sysctls.
        params["inNamespace"] = True
        params.setdefault("dpid", f"{device_id:x}")
        super().__init__(name, **params)
        self.device_id = device_id
        self.run_dir = Path(run_dir).resolve()
        self.start_timeout = start_timeout
        self.shim_log = self.run_dir / f"{name}.shim.log"
        self.socket_path = self.run_dir / f"{name}.p4rt.sock"
        self.p4rt_address = f"unix:{self.socket_path}"
        self.shim: subprocess.Popen[bytes] | LaunchedShim | MemberShim | None = None
        # forks the shim from one warm process (topologies.shim_launcher); None: a new one
        self.launcher = launcher
        # the shim group whose process serves this switch with others (topologies.shim_groups);
        # None: a process of its own
        self.group = group
        if group is not None:
            group.add(self)
        self.shim_exit = self.run_dir / f"{name}.shim.exit"
        self.buffer_bytes = buffer_bytes  # per-port data buffer (None: the shim's default)
        self.egress_model = egress_model

    # -- life cycle ----------------------------------------------------------------
    def shim_command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "linux_target.shim_main",
            "--name",
            self.name,
            "--device-id",
            str(self.device_id),
            "--listen",
            self.p4rt_address,
            "--log",
            str(self.shim_log),
        ]
        for port, ifname in sorted(self.port_map().items()):
            cmd += ["--port", f"{port}={ifname}"]
        for port, mbit in sorted(self.port_rates().items()):
            cmd += ["--rate", f"{port}={mbit:g}"]
        if self.buffer_bytes is not None:
            cmd += ["--buffer-bytes", str(self.buffer_bytes)]
        if not self.egress_model:
            cmd.append("--no-egress-model")
        return cmd

    def port_rates(self) -> dict[int, float]:
        """Link rate (Mbit/s) of every port whose link has one (TCLink ``bw``)."""
        rates = {}
        for port, ifname in self.port_map().items():
            bw = getattr(self.nameToIntf.get(ifname), "params", {}).get("bw")
            if bw:
                rates[port] = float(bw)
        return rates

    def set_port_rate(self, port: int, mbit: float, buffer_bytes: int | None = None) -> None:
        """Slow (or restore) one port: its HTB classes and the virtual queue's drain rate."""
        from linux_target.egress import DEFAULT_BUFFER_BYTES

        ifname = self.port_map()[port]
        buffer = buffer_bytes or self.buffer_bytes or DEFAULT_BUFFER_BYTES
        out = self.cmd(
            f"{sys.executable} -m linux_target.egress set-link --dev {ifname} --rate-mbit {mbit:g} "
            f"--buffer-bytes {buffer} && echo set-link-ok"
        )
        if "set-link-ok" not in out:
            raise RuntimeError(f"{self.name} port {port}: {out.strip()}")

    def set_port_policy(self, port: int, ecn_packets: int, trim_packets: int, last_hop: bool) -> None:
        """Overwrite a port's thresholds in the egress program behind the shim's back (the
        shim's tables keep the controller's entry) — how E9 turns trimming off, as
        simple_switch_CLI does on BMv2."""
        ifname = self.port_map()[port]
        out = self.cmd(
            f"{sys.executable} -m linux_target.egress set-policy --dev {ifname} --ecn-packets {ecn_packets} "
            f"--trim-packets {trim_packets}{' --last-hop' if last_hop else ''} && echo set-policy-ok"
        )
        if "set-policy-ok" not in out:
            raise RuntimeError(f"{self.name} port {port}: {out.strip()}")

    def port_egress(self, port: int) -> dict[str, Any]:
        """The egress program's view of a port (policy, rate, buffer, queue, counters)."""
        ifname = self.port_map()[port]
        out = self.cmd(f"{sys.executable} -m linux_target.egress show --dev {ifname}")
        return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]

    def start(self, controllers: Any = None) -> None:
        self.start_shim()

    def member_request(self) -> dict[str, Any]:
        """This switch in a shim group's start request (``linux_target.shim_group``)."""
        return {
            "argv": self.shim_command()[3:],
            "node_pid": self.pid,
            "log": str(self.shim_log),
            "exit": str(self.shim_exit),
        }

    def start_shim(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        ip_batch(self, [f"link set dev {intf.name} up" for intf in self.intfList() if intf.name != "lo"])
        command = self.shim_command()
        proc: subprocess.Popen[bytes] | LaunchedShim | MemberShim
        if self.group is not None and self.group.launcher.alive():
            try:
                proc = self.group.start_member(self)
            except (GroupError, LauncherError) as exc:
                raise ShimStartError(f"shim of {self.name} did not start: {exc}\n{self._log_tail()}") from exc
        elif self.launcher is not None and self.launcher.alive():
            # (the launcher's child runs shim_main.main with the arguments after "-m module")
            proc = self.launcher.launch(command[3:], self.pid, self.shim_log, self.shim_exit)
        else:
            with open(self.shim_log, "ab") as log:
                proc = self.popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        self.shim = proc

        def still_running() -> bool:
            return proc.poll() is None

        limit = scaled(SHIM_START_TIMEOUT) if self.start_timeout is None else self.start_timeout
        try:
            wait_until_serving(self.p4rt_address, limit, alive=still_running)
        except TimeoutError as exc:
            self.stop_shim()
            what = f"the shim of {self.name} starting (log: {self.shim_log})"
            raise TimeLimitExceeded(what, limit) from exc
        except RuntimeError as exc:
            self.stop_shim()
            raise ShimStartError(f"shim of {self.name} did not start: {exc}\n{self._log_tail()}") from exc

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "".join(self.shim_log.read_text(errors="replace").splitlines(True)[-lines:])
        except OSError:
            return "(no shim log)"

    def stop_shim(self, namespace_going: bool = False) -> None:
        """Stop the shim; with ``namespace_going`` (the whole fabric is being torn down) it
        undoes nothing in the namespace, which goes with everything in it."""
        proc, self.shim = self.shim, None
        if self.group is not None and (proc is None or proc.poll() is not None):
            # its process died; one started again since may serve it (and no handle of ours)
            self.group.stop_member(self.name, namespace_going)
        terminate(proc, SHIM_STOP_TIMEOUT, signal.SIGUSR1 if namespace_going else signal.SIGTERM)
        self.socket_path.unlink(missing_ok=True)
        if self.group is not None:
            self.group.forget_if_gone()

    def restart_shim(self) -> None:
        """Stop and start the shim. In a shim group whose process died (the supervisor's
        restart), only start it: the first member started brings the process back with every
        member, and stopping one of those would remove its routes."""
        proc = self.shim
        if self.group is not None and proc is not None and proc.poll() is not None:
            self.shim = None
            self.start_shim()
            return
        self.stop_shim()
        self.start_shim()

    def stop(self, deleteIntfs: bool = True) -> None:
        self.stop_shim()
        super().stop(deleteIntfs)

    def terminate(self) -> None:
        self.stop_shim()
        super().terminate()
