"""A shim group: several Linux switches served by one process.

Why: a fabric of 128 switches ran 128 shim processes, each with its own copy-on-write copy
of the launcher's Python heap and its own gRPC core (about 12 MiB of private memory each).
A group serves N switches from one process forked from the launcher
(``linux_target.launcher``), each switch exactly as a shim of its own serves it: its own
``ShimSwitch`` (``shim_switch``) with its P4Runtime service, device id, arbitration and
errors, its own ``grpc.server`` on its own unix socket, its own tables, nft table, egress
programs and netlink sockets. Namespaces are per thread on Linux, so each switch's kernel
work runs in its :class:`~linux_target.ns_worker.NamespaceWorker`, the thread in that
switch node's network and mount namespaces; the process's other threads live in a network
namespace of their own that holds nothing (a kernel call that missed its worker fails
there, it never touches the machine's own). Each switch logs to its own log (records go by
thread name, ``<switch>/...``); what belongs to no switch goes to the group's log.

Control: the group listens on a unix socket (``control``) for one JSON request per
connection, answered with ``{"ok": true}`` or ``{"error": "..."}``:

- ``{"start": {"argv": [...], "node_pid": PID, "log": PATH, "exit": PATH}}``: serve one more
  switch (the answer comes once it serves, or with why it could not);
- ``{"stop": NAME}``: stop one switch as SIGTERM stops a shim (it removes what it installed).

A switch's ``exit`` file gets its status when it stops (0) or fails to start (2), as a
shim's exit status. The process ends when its last switch is stopped; SIGTERM stops every
switch that way; SIGUSR1 says every switch's namespace is about to be deleted (the fabric
going down): the group only removes its sockets and exits. Killing the process ends every
switch in it; the routes they installed stay in the kernels (the supervisor starts the
group again and the controller re-syncs each switch: ``stale_routes``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mrc_fabric.thread_errors import install as install_thread_errors

from .netlink_backend import KernelError
from .ns_worker import CLONE_NEWNET, NamespaceWorker, unshare
from .shim_main import build_parser
from .shim_switch import ShimSetupError, ShimSwitch

log = logging.getLogger("mrc-p4rt-shim")

CONTROL_TIMEOUT_S = 120.0  # one control connection: a request and its answer
MEMBER_FIELDS = ("argv", "node_pid", "log", "exit")
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGUSR1}


def write_exit(path: str, status: int) -> None:
    """An exit status, written whole (a reader never sees half of it)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{status}\n")
    os.replace(tmp, path)


class _ThreadsOf(logging.Filter):
    """Records of one switch's threads (named ``<switch>/...``), or (``name`` None) of no
    switch's."""

    def __init__(self, group: ShimGroup, name: str | None) -> None:
        super().__init__()
        self.group, self.switch = group, name

    def filter(self, record: logging.LogRecord) -> bool:
        owner, slash, _ = (record.threadName or "").partition("/")
        if self.switch is None:
            return not slash or owner not in self.group.members
        return bool(slash) and owner == self.switch


@dataclass
class Member:
    switch: ShimSwitch
    exit_path: str
    handler: logging.Handler


class ShimGroup:
    """The switches this process serves, and how to start and stop them."""

    def __init__(self) -> None:
        self.members: dict[str, Member] = {}
        self.lock = threading.Lock()
        self.done = threading.Event()  # the process may end
        self.going = False

    def start(self, req: dict[str, Any]) -> str | None:
        """Start serving one switch; None, or why it could not."""
        missing = [f for f in MEMBER_FIELDS if f not in req]
        if missing:
            return f"start request without {missing}"
        try:
            args = build_parser().parse_args([str(a) for a in req["argv"]])
        except SystemExit:
            return f"bad shim arguments: {req['argv']}"
        name, exit_path = args.name, str(req["exit"])
        if "/" in name:
            return f"switch name {name!r}: a group names threads after switches, no '/' in it"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(exit_path)
        threading.current_thread().name = f"{name}/start"
        with self.lock:
            if name in self.members:
                return f"switch {name} is served already"
            handler = self._member_log(name, args.log or str(req["log"]))
            self.members[name] = Member(
                ShimSwitch(args, NamespaceWorker(name, int(req["node_pid"]))), exit_path, handler
            )
        member = self.members[name]
        try:
            if not str(args.listen).startswith("unix:"):
                raise ShimSetupError("a switch in a shim group listens on a unix socket (--listen unix:PATH)")
            member.switch.worker.start()
            member.switch.start()
        except (ShimSetupError, OSError, KernelError) as exc:
            log.error("%s", exc)
            self._drop(name, 2, namespace_going=False)
            return str(exc)
        except Exception as exc:  # a bug: this switch fails, the group's others serve on
            log.exception("switch %s could not start", name)
            self._drop(name, 2, namespace_going=False)
            return f"{type(exc).__name__}: {exc}"
        return None

    def _member_log(self, name: str, path: str) -> logging.Handler:
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter(f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s"))
        handler.addFilter(_ThreadsOf(self, name))
        logging.getLogger().addHandler(handler)
        return handler

    def stop(self, name: str) -> str | None:
        """Stop one switch, removing what it installed; None, or why not."""
        with self.lock:
            if name not in self.members:
                return f"switch {name} is not served here"
        threading.current_thread().name = f"{name}/stop"
        log.info("stopping")
        self._drop(name, 0, namespace_going=False)
        return None

    def _drop(self, name: str, status: int, namespace_going: bool) -> None:
        member = self.members[name]
        try:
            member.switch.stop(namespace_going=namespace_going)
        except Exception:  # best effort: what is left, the next shim of this switch removes
            log.exception("stopping %s failed", name)
        with contextlib.suppress(OSError):
            write_exit(member.exit_path, status)
        with self.lock:
            self.members.pop(name, None)
            empty = not self.members
        logging.getLogger().removeHandler(member.handler)
        member.handler.close()
        if empty and status == 0:
            self.done.set()

    def stop_all(self) -> None:
        """Every switch stopped as SIGTERM stops a shim, side by side."""
        threads = [threading.Thread(target=self.stop, args=(n,), daemon=True) for n in list(self.members)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def namespaces_going(self) -> None:
        """SIGUSR1: every switch's namespace goes with all in it; only the sockets are removed."""
        self.going = True
        for member in list(self.members.values()):
            if member.switch.sock is not None:
                member.switch.sock.unlink(missing_ok=True)
        self.done.set()


def _answer(group: ShimGroup, conn: socket.socket) -> None:
    """One control connection: one request, one answer."""
    with conn:
        conn.settimeout(CONTROL_TIMEOUT_S)
        try:
            line = conn.makefile("rb").readline()
            req = json.loads(line or b"{}")
            if "start" in req:
                error = group.start(req["start"])
            elif "stop" in req:
                error = group.stop(str(req["stop"]))
            else:
                error = f"unknown request {sorted(req)}"
            conn.sendall((json.dumps({"error": error} if error else {"ok": True}) + "\n").encode())
        except (OSError, ValueError) as exc:
            log.warning("control request failed: %s", exc)


def _listen(group: ShimGroup, path: Path) -> socket.socket:
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(64)

    def accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return  # closed: the group is ending
            threading.Thread(target=_answer, args=(group, conn), name="control", daemon=True).start()

    threading.Thread(target=accept, name="control-accept", daemon=True).start()
    return sock


def serve(members: list[dict[str, Any]], control: Path) -> int:
    """Serve ``members`` (and those started over ``control``) until the last one stops."""
    # every thread of the process starts here, in a network namespace of its own that holds
    # nothing: only the switches' workers (and link watchers) enter a switch's namespace
    unshare(CLONE_NEWNET)
    group = ShimGroup()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(threadName)s %(levelname)s %(name)s: %(message)s"
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(_ThreadsOf(group, None))
    install_thread_errors(lambda line: log.error("%s", line))
    # The stop signals are taken by one thread that waits for them (sigwait), blocked in every
    # other: a Python handler runs in the main thread only, and a process of a hundred threads
    # may have the kernel deliver a signal to another one, leaving the main thread asleep.
    # (Blocked here, before any thread starts, so every thread inherits it; nft, tc and bpftool
    # started by the workers inherit it too, and nothing signals them.)
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    threading.Thread(target=_take_signals, args=(group,), name="signals", daemon=True).start()
    listener = _listen(group, control)
    starts = [threading.Thread(target=group.start, args=(m,), daemon=True) for m in members]
    for t in starts:
        t.start()
    for t in starts:
        t.join()
    if members and not group.members:
        log.error("no switch of the group could start")
        listener.close()
        control.unlink(missing_ok=True)
        return 2
    group.done.wait()
    listener.close()
    control.unlink(missing_ok=True)
    if group.going:
        log.info("stopping; the namespaces go with their routes, tables and programs")
        logging.shutdown()
        os._exit(0)
    return 0


def _take_signals(group: ShimGroup) -> None:
    """SIGTERM/SIGINT: every switch stopped, its state removed; SIGUSR1: the namespaces go."""
    if signal.sigwait(STOP_SIGNALS) == signal.SIGUSR1:
        group.namespaces_going()
        return
    threading.Thread(target=_namespaces_going_later, args=(group,), name="signals", daemon=True).start()
    group.stop_all()
    group.done.set()


def _namespaces_going_later(group: ShimGroup) -> None:
    """A SIGUSR1 while the switches are being stopped: stop waiting for them."""
    if signal.sigwait({signal.SIGUSR1}) == signal.SIGUSR1:
        group.namespaces_going()


def main(members: list[dict[str, Any]], control: str) -> int:
    try:
        return serve(members, Path(control))
    except KeyboardInterrupt:
        return 0
    finally:
        sys.stdout.flush()
