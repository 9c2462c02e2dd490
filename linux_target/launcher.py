"""``python -m linux_target.launcher``: start P4Runtime shims by forking one warm process.

Why: a fabric of 128 switches started 128 Python interpreters, each importing grpc,
finsy and pyroute2 before it served a single request (about 0.25 CPU-seconds and 16 MiB
each). The launcher imports all that once; each shim is then a ``fork`` of it, moved into
its switch's network and mount namespaces, running :func:`linux_target.shim_main.main` with the
command line it would have had. A shim stays a process of its own: its device, its
arbitration, its errors and its death are its own, exactly as before, and the pages it
never writes stay shared with the launcher and every other shim.

Protocol (the testbed's :class:`topologies.shim_launcher.ShimLauncher` speaks it): the
launcher prints ``ready`` on stdout, then reads one JSON object per line on stdin::

    {"argv": [...shim arguments...], "node_pid": PID, "log": PATH, "exit": PATH}

or, for a shim group (``linux_target.shim_group``: several switches served by one process)::

    {"group": [{"argv": [...], "node_pid": PID, "log": PATH, "exit": PATH}, ...],
     "control": PATH, "log": PATH, "exit": PATH}

and answers each with one line, ``{"pid": N}`` or ``{"error": "..."}``. A group's child stays
in the launcher's namespaces (each switch's thread enters its own node's). When a shim exits,
the launcher (its parent) reaps it and writes its exit status to its ``exit`` file (a
negative number: the signal that killed it, as ``subprocess`` reports it). The launcher
exits at the end of its stdin, or when the process that started it dies.
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401 - see grpc._server below
import contextlib
import ctypes
import gc
import json
import os
import selectors
import signal
import sys
import traceback
from typing import Any

# a shim's grpc.server() imports these two on first use: imported here, before the fork,
# their objects sit in pages every shim shares (1.1 MiB less private memory in each shim)
import grpc._server  # noqa: F401

import linux_target.shim_group as shim_group
import linux_target.shim_main as shim_main
from linux_target.egress import build_object
from linux_target.ns_worker import enter_node
from linux_target.shim_group import write_exit
from mrc_fabric.p4info import default_index

PR_SET_PDEATHSIG = 1
FIELDS = ("argv", "node_pid", "log", "exit")
GROUP_FIELDS = ("group", "control", "log", "exit")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def run_child(req: dict[str, Any], keep: set[int]) -> None:
    """In the forked child: become the shim, or the shim group (never returns)."""
    status = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        if "group" not in req:
            # a node has its own mount table (its /sys): whatever the shim's tools read or
            # mount there stays there, not in the machine's
            enter_node(int(req["node_pid"]))
        devnull = os.open(os.devnull, os.O_RDONLY)
        log = os.open(str(req["log"]), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        for fd in {devnull, log, *keep} - {0, 1, 2}:  # (the launcher's stdin/stdout are 0 and 1)
            with contextlib.suppress(OSError):
                os.close(fd)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own fds, kept open
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        # the launcher's objects stay frozen in the child too: thawed, a full collection in the
        # child would write to every one of them and copy their pages into the child
        if "group" in req:
            sys.argv = ["mrc-p4rt-shim-group"]
            status = shim_group.main(list(req["group"]), str(req["control"]))
        else:
            sys.argv = ["mrc-p4rt-shim", *[str(a) for a in req["argv"]]]
            status = shim_main.main(sys.argv[1:])
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


def reap(exits: dict[int, str]) -> None:
    """Every exited child reaped, its status written to its exit file."""
    while True:
        try:
            pid, raw = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        path = exits.pop(pid, None)
        if path is not None:
            code = -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)
            with contextlib.suppress(OSError):
                write_exit(path, code)


def serve() -> int:
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # (the wake-up fd does the work)
    exits: dict[int, str] = {}
    requests = sys.stdin.buffer
    answers = sys.stdout
    sel = selectors.DefaultSelector()
    sel.register(requests, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    default_index()  # the committed P4Info, parsed once for every shim
    build_object()  # the egress program, compiled (if it is not yet) once for every shim
    gc.collect()
    gc.freeze()  # what is imported now stays shared: a child's collector never writes to it
    print("ready", file=answers, flush=True)
    keep = {wake_r, wake_w, requests.fileno(), answers.fileno()}
    while True:
        for key, _ in sel.select():
            if key.fileobj == wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                reap(exits)
                continue
            line = requests.readline()
            if not line:
                return 0
            try:
                req = json.loads(line)
                for field in GROUP_FIELDS if "group" in req else FIELDS:
                    if field not in req:
                        raise ValueError(f"request without {field!r}")
            except ValueError as exc:
                print(json.dumps({"error": str(exc)}), file=answers, flush=True)
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(req["exit"]))
            pid = os.fork()
            if pid == 0:
                run_child(req, keep)
            exits[pid] = str(req["exit"])
            print(json.dumps({"pid": pid}), file=answers, flush=True)
        reap(exits)


def main() -> int:
    try:
        return serve()
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
