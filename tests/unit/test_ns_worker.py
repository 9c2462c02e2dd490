"""The namespace worker: one thread that runs a switch's kernel work, handed to it from any thread.

Why: in a shim group each switch's kernel work must run in the thread that entered its node's
namespaces (``linux_target.ns_worker``); a call must come back with its result or its
exception, a call made from the worker itself must not wait on itself, and a stopped worker
must refuse work rather than leave its caller waiting for ever.
"""

from __future__ import annotations

import threading

import pytest

from linux_target.ns_worker import NamespaceWorker


def test_calls_run_in_the_worker_thread_and_return_their_result() -> None:
    worker = NamespaceWorker("sw1").start()
    try:
        assert worker.call(lambda: threading.current_thread().name) == "sw1/ns"
        assert worker.call(pow, 2, 10) == 1024
        assert worker.wrap(lambda x: x + 1)(41) == 42
    finally:
        worker.stop()


def test_an_exception_comes_back_to_the_caller() -> None:
    worker = NamespaceWorker("sw1").start()
    try:
        with pytest.raises(ZeroDivisionError):
            worker.call(lambda: 1 // 0)
        assert worker.call(lambda: "still serving") == "still serving"
    finally:
        worker.stop()


def test_a_call_from_the_worker_itself_runs_at_once() -> None:
    worker = NamespaceWorker("sw1").start()
    try:
        assert worker.call(lambda: worker.call(lambda: threading.current_thread().name)) == "sw1/ns"
    finally:
        worker.stop()


def test_a_stopped_worker_refuses_work() -> None:
    worker = NamespaceWorker("sw1").start()
    worker.stop()
    with pytest.raises(RuntimeError, match="not running"):
        worker.call(lambda: None)


def test_a_node_that_is_gone_is_an_error_at_start() -> None:
    with pytest.raises(OSError):
        NamespaceWorker("sw1", node_pid=2**22 + 1).start()  # above pid_max: no such process
