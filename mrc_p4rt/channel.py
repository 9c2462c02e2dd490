"""Waiting for a P4Runtime server and arbitrating on its StreamChannel."""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc
from finsy.proto import p4r, p4r_grpc

UINT64 = (1 << 64) - 1
# The controller's election id, (high 2, low 0) in p4runtime-shell's "HIGH,LOW" notation: above
# p4runtime-shell's default (1,0), so a tool that connects with its defaults is a backup that may
# read and never takes the switches from the controller; (3,0) or higher takes them on purpose
CONTROLLER_ELECTION_ID = 2 << 64


def set_election_id(msg: p4r.Uint128, election_id: int) -> None:
    msg.high, msg.low = election_id >> 64, election_id & UINT64


def arbitration_request(device_id: int, election_id: int) -> p4r.StreamMessageRequest:
    req = p4r.StreamMessageRequest()
    req.arbitration.device_id = device_id
    set_election_id(req.arbitration.election_id, election_id)
    return req


def wait_for_p4runtime(channel: grpc.Channel, timeout: float) -> p4r.CapabilitiesResponse:
    """Capabilities, waiting up to ``timeout`` for ``channel`` to connect first.

    Why not ``grpc.channel_ready_future``: it watches the channel from a thread of its own,
    and a channel closed before that thread has run (a timeout on a busy machine, a switch
    that went away) makes the thread die with an uncaught "Channel closed!" traceback.
    ``wait_for_ready`` waits inside the call and leaves nothing running behind it.
    """
    stub = p4r_grpc.P4RuntimeStub(channel)
    return stub.Capabilities(p4r.CapabilitiesRequest(), timeout=timeout, wait_for_ready=True)


def wait_until_serving(address: str, timeout: float, alive: Callable[[], bool] | None = None) -> None:
    """Block until a P4Runtime server answers Capabilities at ``address``.

    Raises TimeoutError after ``timeout`` seconds, RuntimeError as soon as
    ``alive()`` says the server process is gone.
    """
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            raise RuntimeError(f"the server for {address} exited before answering")
        with grpc.insecure_channel(address) as channel:
            try:
                wait_for_p4runtime(channel, max(0.05, min(1.0, deadline - time.monotonic())))
                return
            except grpc.RpcError as exc:
                last = exc
        time.sleep(0.05)  # back off between connection attempts (the deadline bounds the wait)
    raise TimeoutError(f"no P4Runtime server at {address} after {timeout:.1f}s: {last}")
