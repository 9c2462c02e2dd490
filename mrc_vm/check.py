"""`make vm-test`: boot the image of the tree being tested and check the testbed inside it.

The steps run in the guest over SSH (loopback only), each under a time limit scaled from the
measured speed of the guest; each prints its lines as they come, then one result line; the run
ends with one PASS or FAIL line and the matching exit status. Logs land in `results/vm-test/`.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mrc_vm.builder import BuiltImage
from mrc_vm.image import GUEST_PROJECT, kernel_cmdline, qemu_img_overlay_argv
from mrc_vm.qemu import VmSpec
from mrc_vm.timing import Speeds, boot_limit_s, guest_calibration_command, median_seconds, step_limit_s
from mrc_vm.vm import Guest, StepResult, free_port

# The Linux target's integration tests: its forwarding, egress program, kernel sync, shim and
# Mininet fabric, and the live testbed's tests on it: controller restarts, fidelity, lifecycle.
SUITES = {
    "linux": (
        "tests/integration/test_linux_forwarding.py tests/integration/test_linux_egress.py "
        "tests/integration/test_linux_kernel_sync.py tests/integration/test_linux_congestion.py "
        "tests/integration/test_linux_shim_conformance.py tests/integration/test_linux_mininet.py "
        "tests/integration/test_shim_group.py tests/integration/test_shim_launcher.py "
        "tests/integration/test_testbed.py tests/integration/test_testbed_lifecycle.py "
        "tests/integration/test_controller_resilience.py tests/integration/test_fidelity_live.py"
    ),
    "integration": "tests/integration",
    "all": "",
}
# Native seconds on the reference machine (2 cores, idle), scaled by timing.step_limit_s.
REFERENCE_S = {"demo": 150.0, "linux": 900.0, "integration": 1500.0, "all": 2400.0}
SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")


@dataclass
class Outcome:
    """One step's result line."""

    name: str
    ok: bool
    detail: str
    seconds: float = 0.0


@dataclass
class Report:
    accel: str
    accel_why: str
    image: str
    outcomes: list[Outcome] = field(default_factory=list)
    boot_s: float | None = None
    host_s: float | None = None
    guest_s: float | None = None
    tests: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return bool(self.outcomes) and all(o.ok for o in self.outcomes)


def demo_command() -> str:
    return f"cd {GUEST_PROJECT} && sudo ./run.sh demo 'DEMO_ARGS=--target linux'"


def tests_command(suite: str) -> str:
    args = f"-p no:cacheprovider {SUITES[suite]}".strip()
    return f"cd {GUEST_PROJECT} && sudo ./run.sh test 'PYTEST_ARGS={args}'"


def pytest_counts(output: str) -> dict[str, int]:
    """Counts from pytest's closing line (`== 83 passed, 7 failed in 812.3s ==`)."""
    for line in reversed(output.splitlines()):
        if line.startswith("=") and (found := SUMMARY.findall(line)):
            return {kind.rstrip("s") if kind.startswith("error") else kind: int(n) for n, kind in found}
    return {}


class Check:
    """One vm-test run: its guest, its logs, its report."""

    def __init__(
        self,
        image: BuiltImage,
        key: Path,
        out: Path,
        accel: str,
        accel_why: str,
        suite: str,
        speeds: Speeds,
        cpus: int = 2,
        memory_mib: int = 6144,
    ) -> None:
        self.image, self.key, self.out, self.suite, self.speeds = image, key, out, suite, speeds
        self.cpus, self.memory_mib = cpus, memory_mib
        self.report = Report(accel, accel_why, image.path.name, host_s=speeds.host_s)

    def say(self, msg: str) -> None:
        print(f"vm-test: {msg}", flush=True)

    def result(self, outcome: Outcome) -> None:
        self.report.outcomes.append(outcome)
        mark = "PASS" if outcome.ok else "FAIL"
        print(f"[{mark}] {outcome.name}: {outcome.detail} ({outcome.seconds:.0f} s)", flush=True)

    def run(self) -> Report:
        self.out.mkdir(parents=True, exist_ok=True)
        overlay = self.out / "overlay.qcow2"
        overlay.unlink(missing_ok=True)
        subprocess.run(qemu_img_overlay_argv(self.image.disk, overlay), check=True)
        spec = VmSpec(
            # the image's own kernel and initramfs, started by QEMU (the boot Vagrant tests goes through GRUB)
            kernel=self.image.kernel,
            initrd=self.image.initrd,
            append=kernel_cmdline(),
            disk=overlay,
            ssh_port=free_port(),
            console_log=self.out / "console.log",
            accel=self.report.accel,
            cpus=self.cpus,
            memory_mib=self.memory_mib,
            name="mrc-vm-test",
        )
        boot_limit = boot_limit_s(self.speeds, self.report.accel)
        hard = boot_limit + 600 + step_limit_s(REFERENCE_S["demo"], self.speeds) * 2
        hard += step_limit_s(REFERENCE_S[self.suite], self.speeds)
        self.say(
            f"booting {self.image.path.name} ({self.report.accel.upper()}, {self.cpus} vCPUs, "
            f"{self.memory_mib} MiB; boot limit {boot_limit:.0f} s, whole run {hard / 60:.0f} min)"
        )
        try:
            with Guest(spec, self.key, hard, self.out / "qemu.log") as guest:
                self._steps(guest, boot_limit)
        except (RuntimeError, TimeoutError) as exc:
            self.result(Outcome("vm", False, str(exc)))
        finally:
            overlay.unlink(missing_ok=True)
        (self.out / "summary.json").write_text(json.dumps(asdict(self.report), indent=1))
        return self.report

    def _steps(self, guest: Guest, boot_limit: float) -> None:
        self.report.boot_s = guest.wait_ssh(boot_limit)
        self.result(
            Outcome("boot", True, f"SSH answered after {self.report.boot_s:.0f} s", self.report.boot_s)
        )
        cal = guest.run(guest_calibration_command(), 600)
        self.report.guest_s = median_seconds(cal.output)
        self.speeds = Speeds(self.speeds.host_s, self.report.guest_s)
        remaining = (
            600
            + step_limit_s(REFERENCE_S["demo"], self.speeds)
            + step_limit_s(REFERENCE_S[self.suite], self.speeds)
        )
        guest.rearm(remaining)
        self.say(
            f"whole run now limited to {remaining / 60:.0f} more min; "
            f"guest CPU: the calibration loop takes {self.report.guest_s:.2f} s there, "
            f"{self.speeds.guest_vs_host:.1f}x the host's {self.speeds.host_s:.2f} s"
        )
        uname = guest.run("uname -r; findmnt -n -o FSTYPE /sys/fs/bpf || echo none", 120)
        lines = [*uname.output.splitlines(), "", ""]
        expected = str(self.image.meta.get("kernel"))
        self.result(
            Outcome(
                "uname -r",
                uname.rc == 0 and lines[0] == expected,
                f"{lines[0]} (image's kernel {expected}; /sys/fs/bpf: {lines[1]})",
                uname.seconds,
            )
        )
        self._demo(guest)
        self._tests(guest)

    def _logged(self, guest: Guest, name: str, command: str, limit: float) -> StepResult:
        log = self.out / f"{name}.log"
        self.say(f"{name}: {command} (limit {limit / 60:.0f} min, log {log})")
        with log.open("w") as fh:

            def on_line(line: str) -> None:
                fh.write(line + "\n")
                fh.flush()
                print(f"  vm| {line}", flush=True)

            return guest.run(command, limit, on_line)

    def _demo(self, guest: Guest) -> None:
        res = self._logged(guest, "demo", demo_command(), step_limit_s(REFERENCE_S["demo"], self.speeds))
        why = "timed out" if res.timed_out else f"exit {res.rc}"
        self.result(Outcome("demo", res.rc == 0, "exit 0" if res.rc == 0 else why, res.seconds))
        fetched = guest.run(f"sudo cat {GUEST_PROJECT}/runs/latest/results.json", 120)
        if fetched.rc == 0:
            (self.out / "demo-results.json").write_text(fetched.output + "\n")

    def _tests(self, guest: Guest) -> None:
        limit = step_limit_s(REFERENCE_S[self.suite], self.speeds)
        res = self._logged(guest, f"tests-{self.suite}", tests_command(self.suite), limit)
        self.report.tests = counts = pytest_counts(res.output)
        text = ", ".join(f"{n} {k}" for k, n in counts.items()) or "no pytest summary"
        ok = (
            res.rc == 0
            and counts.get("passed", 0) > 0
            and not counts.get("failed")
            and not counts.get("error")
        )
        self.result(
            Outcome(
                f"tests ({self.suite})", ok, text + (" — timed out" if res.timed_out else ""), res.seconds
            )
        )
