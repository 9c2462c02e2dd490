"""`mrc-vm build | test | box | clean` (`make vm-image`, `make vm-test`, `make vm-box`)."""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mrc_vm import box, builder, firstboot
from mrc_vm.check import SUITES, Check
from mrc_vm.image import CacheLayout
from mrc_vm.qemu import choose_accel
from mrc_vm.timing import Speeds, host_calibration


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mrc-vm", description=__doc__)
    p.add_argument(
        "--tree", type=Path, default=Path.cwd(), help="the checkout to put in the image (its HEAD)"
    )
    p.add_argument("--rev", default="HEAD", help="the commit of the tree to put in the image (default HEAD)")
    p.add_argument("--accel", choices=("auto", "kvm", "tcg"), default=os.environ.get("MRC_VM_ACCEL", "auto"))
    p.add_argument("--disk-gib", type=int, default=24)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build the image of the tree's HEAD (cached)")
    t = sub.add_parser("test", help="boot the image and run uname, the demo and the tests inside")
    t.add_argument("--suite", choices=sorted(SUITES), default=os.environ.get("MRC_VM_SUITE", "linux"))
    t.add_argument("--cpus", type=int, default=int(os.environ.get("MRC_VM_CPUS", "2")))
    t.add_argument("--memory", type=int, default=int(os.environ.get("MRC_VM_MEMORY", "6144")), help="MiB")
    t.add_argument("--out", type=Path, default=Path("results/vm-test"))
    b = sub.add_parser("box", help="pack the image as a Vagrant box for libvirt")
    b.add_argument("--out", type=Path, default=Path("results/vm/mrc-testbed-debian12.box"))
    sub.add_parser("clean", help="remove the image cache")
    return p


def exit_on_sigterm() -> None:
    """SIGTERM (``kill``, a CI's timeout) ends the run as an exit does: the ``finally`` blocks run,
    so QEMU is stopped and the throwaway overlay removed (Python's default would leave them)."""

    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def main(argv: list[str] | None = None) -> int:
    exit_on_sigterm()
    args = _parser().parse_args(argv)
    layout = CacheLayout()
    if args.cmd == "clean":
        firstboot.remove_cache(layout)
        print(f"vm: removed {layout.root}")
        return 0
    if os.geteuid() != 0:
        print("mrc-vm: needs root (debootstrap, chroot); run it with sudo", file=sys.stderr)
        return 2
    tree = args.tree.resolve()
    if args.rev == "HEAD" and subprocess.run(["git", "-C", str(tree), "diff", "--quiet", "HEAD"]).returncode:
        print("vm: note: the tree has uncommitted changes; the image holds its last commit only", flush=True)
    t0 = time.monotonic()
    speeds = Speeds(host_calibration())
    try:
        spec = builder.spec_for(tree, args.rev, args.disk_gib)
    except subprocess.CalledProcessError:
        print(f"vm: {args.rev[:60]!r} is not a commit of {tree}", file=sys.stderr)
        return 2
    layout.root.mkdir(parents=True, exist_ok=True)
    with (layout.root / "build.lock").open("w") as lock:
        # one build at a time per cache: a second run waits, then finds the image built
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = builder.cached_image(spec, layout)
        accel, why = choose_accel(args.accel, cached.kernel if cached else None)
        print(f"vm: {accel.upper()}: {why}; host calibration {speeds.host_s:.2f} s", flush=True)
        try:
            image = firstboot.ensure_image(tree, layout, spec, accel, speeds)
        except (RuntimeError, TimeoutError, subprocess.CalledProcessError) as exc:
            print(f"vm: FAIL: the image could not be built: {exc}", flush=True)
            return 1
    built = "cached" if cached else f"built in {image.meta.get('build_seconds')} s"
    print(f"vm: image {image.path.name} ({built}; kernel {image.meta.get('kernel')})", flush=True)
    if args.cmd == "build":
        return 0
    if args.cmd == "box":
        box.pack(image, layout, args.out)
        return 0
    check = Check(
        image, builder.ssh_key(layout), args.out, accel, why, args.suite, speeds, args.cpus, args.memory
    )
    report = check.run()
    verdict = "PASS" if report.ok else "FAIL"
    failed = ", ".join(o.name for o in report.outcomes if not o.ok)
    took = time.monotonic() - t0
    what = f"{verdict}: {failed}" if failed else verdict
    print(f"vm-test: {what} ({accel.upper()}, {took:.0f} s; logs in {args.out})", flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
