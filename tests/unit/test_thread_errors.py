"""A fabric that comes up and goes down while channels close under it prints no traceback.

Why: on a big fabric, grpc's connectivity watcher threads died with "Channel closed!"
when a channel closed before they ran, and Python printed each as a full traceback. The
waits no longer start such threads (``mrc_p4rt.channel.wait_for_p4runtime``), and every
long-lived process reports an exception that ends a thread as one line, once
(``mrc_fabric.thread_errors``).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from types import SimpleNamespace

from mrc_fabric.thread_errors import ThreadErrors

ROOT = Path(__file__).resolve().parents[2]

CHURN = textwrap.dedent(
    """
    import sys, threading, time
    from pathlib import Path
    sys.path.insert(0, "tests")
    from controller_lab import fake_switches
    from controller.core import ControllerCore
    from mrc_fabric.thread_errors import install
    from mrc_fabric.topology import build_clos
    from mrc_p4rt.channel import wait_until_serving

    import grpc._channel

    reports = []
    install(reports.append)
    # a busy machine, made certain: every connectivity watcher thread grpc starts runs only
    # after the waits that started it have given up and closed their channels
    watch = grpc._channel._poll_connectivity

    def starved(*args, **kwargs):
        time.sleep(1.2)
        return watch(*args, **kwargs)

    grpc._channel._poll_connectivity = starved
    d = Path(sys.argv[1])
    topo = build_clos(2, 4, 2, 1, prefix="te", p4rt_address_format=f"unix:{d}/{{name}}.sock")
    switches = list(fake_switches(topo, d).values())

    def late(sw):  # every waiter's first attempt times out and closes its channel
        time.sleep(1.5)
        sw.start()

    starters = [threading.Thread(target=late, args=(sw,)) for sw in switches]
    waiters = [threading.Thread(target=wait_until_serving, args=(f"unix:{sw.socket}", 20)) for sw in switches]
    for t in starters + waiters:
        t.start()
    for t in starters + waiters:
        t.join()
    core = ControllerCore(topo, run_dir=d)
    core.start()
    assert core.wait_ready(20) == [], "controller did not reach every switch"
    core.install_routes()
    for sw in switches[::2]:  # half the switches go away under the controller's sessions
        sw.stop()
    time.sleep(0.5)
    for sw in switches[::2]:
        sw.start()
    assert core.wait_ready(20) == [], "controller did not reach the restarted switches"
    for sw in switches:  # and all of them go while the controller still holds its channels
        sw.stop()
    core.stop()
    time.sleep(0.5)  # what a closed channel's threads would do, they do within this
    print("reports", len(reports), reports)
    """
)


def test_a_fabric_up_and_down_with_channels_closing_prints_no_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHURN, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "reports 0" in proc.stdout, proc.stdout


def _args(name: str, exc: BaseException) -> SimpleNamespace:
    thread = SimpleNamespace(name=name)
    return SimpleNamespace(exc_type=type(exc), exc_value=exc, exc_traceback=None, thread=thread)


def test_the_same_error_from_the_same_kind_of_thread_is_reported_once() -> None:
    lines: list[str] = []
    hook = ThreadErrors(lines.append)
    for n in range(5):
        hook(_args(f"Thread-{n + 10}", ValueError("Cannot monitor channel state: Channel closed!")))
    hook(_args("Thread-3", ValueError("something else")))
    hook(_args("p4rt_0", RuntimeError("boom\n  second line")))
    assert lines == [
        "thread Thread-10: ValueError: Cannot monitor channel state: Channel closed!",
        "thread Thread-3: ValueError: something else",
        "thread p4rt_0: RuntimeError: boom second line",
    ]
    assert max(hook.seen.values()) == 5


def test_an_installed_hook_takes_a_real_thread_s_exception_and_can_be_removed() -> None:
    from mrc_fabric.thread_errors import install

    lines: list[str] = []
    before = threading.excepthook
    hook = install(lines.append)
    try:

        def fail() -> None:
            raise OSError("socket went away")

        t = threading.Thread(target=fail, name="watcher")
        t.start()
        t.join()
    finally:
        hook.uninstall()
    assert lines == ["thread watcher: OSError: socket went away"]
    assert threading.excepthook is before
