"""One thread that does a switch's kernel work inside the switch's namespaces.

Why: several switches can be served by one process (``linux_target.shim_group``), and a
process's namespaces are not one thing on Linux: ``setns(CLONE_NEWNET)`` moves only the
calling thread, and so does ``setns(CLONE_NEWNS)`` once the thread stopped sharing its
filesystem attributes (``unshare(CLONE_FS)``). A :class:`NamespaceWorker` is that thread
for one switch: it enters the switch node's network and mount namespaces once, then runs
every kernel operation of the switch handed to it (:meth:`call`): netlink sockets are made
and used there (pyroute2's sync sockets belong to the thread that made them), /proc/sys
writes land in its namespace, and ``nft``, ``tc`` and ``bpftool`` started from it inherit
its namespaces. Without a node (a shim that runs alone, started in its namespace) the
worker stays where the process is.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

CLONE_FS = 0x00000200
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000

T = TypeVar("T")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def enter_namespace(path: str, kind: int) -> None:
    """Move the calling thread into the namespace at ``path``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc().setns(fd, kind) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def unshare(flags: int) -> None:
    """``unshare(2)`` for the calling thread (CLONE_FS, CLONE_NEWNET)."""
    if _libc().unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare({flags:#x}): {os.strerror(err)}")


def enter_node(pid: int, mount: bool = True) -> None:
    """The calling thread into the network (and mount) namespace of Mininet node ``pid``,
    as ``mnexec -a`` does for a process: a node has its own mount table (its /sys)."""
    if mount:
        unshare(CLONE_FS)  # setns(CLONE_NEWNS) refuses a thread sharing its fs attributes
    enter_namespace(f"/proc/{pid}/ns/net", CLONE_NEWNET)
    if mount:
        enter_namespace(f"/proc/{pid}/ns/mnt", CLONE_NEWNS)


class NamespaceWorker:
    """A thread in one node's namespaces that runs the calls handed to it, one at a time."""

    def __init__(self, name: str, node_pid: int | None = None) -> None:
        self.name = name
        self.node_pid = node_pid
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._closed = False
        self._lock = threading.Lock()  # no call is queued after stop()'s end marker
        self._thread = threading.Thread(target=self._run, name=f"{name}/ns", daemon=True)

    def start(self) -> NamespaceWorker:
        """Start the thread; raises OSError when it cannot enter the node's namespaces."""
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise self._error
        return self

    def _run(self) -> None:
        try:
            if self.node_pid is not None:
                enter_node(self.node_pid)
        except BaseException as exc:  # handed to start()
            self._error = exc
            self._started.set()
            return
        self._started.set()
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, fut = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except BaseException as exc:  # raised again in the caller's thread
                fut.set_exception(exc)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` run in the worker's thread (at once when called from it);
        its result, or its exception raised here."""
        if threading.current_thread() is self._thread:
            return fn(*args, **kwargs)
        fut: Future[T] = Future()
        with self._lock:
            if self._closed or not self._thread.is_alive():
                raise RuntimeError(f"the namespace worker of {self.name} is not running")
            self._jobs.put((lambda: fn(*args, **kwargs), fut))
        return fut.result()

    def wrap(self, fn: Callable[..., T]) -> Callable[..., T]:
        """``fn`` made to run in the worker wherever it is called from."""
        return lambda *args, **kwargs: self.call(fn, *args, **kwargs)

    def stop(self) -> None:
        """End the thread once the calls already handed to it are done."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._jobs.put(None)
        if threading.current_thread() is not self._thread:
            with contextlib.suppress(RuntimeError):
                self._thread.join(timeout=10)
