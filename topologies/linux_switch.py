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
    net.stop()               # stop(): SIGTERM to the shim by PID (SIGKILL after 5 s), socket removed

The switch lives in its own network namespace (``inNamespace=True``); the shim
runs inside it and programs that namespace only: seg6local End next-csid for
``my_usid``, /48 routes for ``usid_route``, nftables for faults. There is no
ECN marking and no trimming on this target (the kernel has no RED/netem); the
shim logs so when it starts. Forwarding and seg6 sysctls are set by the shim
before it starts serving, so a switch that answers gRPC is ready to forward.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from linux_target.p4rt_client import wait_until_serving
from topologies.p4_switch import P4PortsSwitch

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
        run_dir: str | os.PathLike = "runs",
        start_timeout: float = SHIM_START_TIMEOUT,
        **params,
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
        self.shim: subprocess.Popen | None = None

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
        return cmd

    def start(self, controllers=None) -> None:
        self.start_shim()

    def start_shim(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for intf in self.intfList():
            if intf.name != "lo":
                self.cmd(f"ip link set dev {intf.name} up")
        with open(self.shim_log, "ab") as log:
            self.shim = self.popen(
                self.shim_command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        proc = self.shim

        def still_running() -> bool:
            return proc.poll() is None

        try:
            wait_until_serving(self.p4rt_address, self.start_timeout, alive=still_running)
        except (TimeoutError, RuntimeError) as exc:
            self.stop_shim()
            raise ShimStartError(f"shim of {self.name} did not start: {exc}\n{self._log_tail()}") from exc

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "".join(self.shim_log.read_text(errors="replace").splitlines(True)[-lines:])
        except OSError:
            return "(no shim log)"

    def stop_shim(self) -> None:
        proc, self.shim = self.shim, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=SHIM_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.socket_path.unlink(missing_ok=True)

    def restart_shim(self) -> None:
        self.stop_shim()
        self.start_shim()

    def stop(self, deleteIntfs: bool = True) -> None:
        self.stop_shim()
        super().stop(deleteIntfs)

    def terminate(self) -> None:
        self.stop_shim()
        super().terminate()
