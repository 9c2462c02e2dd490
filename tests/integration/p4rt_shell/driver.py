"""Drive a P4Runtime server with p4runtime-shell and print what happened as JSON.

Runs inside the p4runtime-shell venv made by the conformance test (p4runtime-shell pins
an old protobuf, so it cannot share the project's interpreter): only the standard
library and p4runtime_sh are imported. Usage:

    driver.py ADDRESS DEVICE_ID P4INFO_TXT

Each step records what the third-party client saw, so the test can assert on it:
the pipeline push, write/read/modify, a refused insert and a batch of failed updates
(p4runtime-shell's P4RuntimeWriteException per-update list), the default entry, and
arbitration between three clients.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable

import grpc
from p4.v1 import p4runtime_pb2
from p4runtime_sh import shell as sh
from p4runtime_sh.p4runtime import P4RuntimeClient, P4RuntimeWriteException

ROUTE = "fcbb:bb00:8000::/48"
MISSING = "fcbb:bb00:9000::/48"


def route(prefix: str, port: str = "1") -> sh.TableEntry:
    te = sh.TableEntry("usid_route")(action="set_next_hop")
    te.match["dst_addr"] = prefix
    te.action["port"] = port
    te.action["dmac"] = "02:00:00:aa:00:01"
    return te


def write_errors(exc: P4RuntimeWriteException) -> list[list[object]]:
    return [[i, grpc.StatusCode(_code(e.canonical_code)).name, e.message] for i, e in exc.errors]


def _code(number: int) -> tuple[int, str]:
    return next(c.value for c in grpc.StatusCode if c.value[0] == number)


def wait_until_primary(client: P4RuntimeClient, timeout: float) -> bool:
    """Read the client's arbitration updates until one says OK (primary), up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = client.get_stream_packet("arbitration", timeout=max(0.0, deadline - time.monotonic()))
        if msg is not None and msg.arbitration.status.code == 0:
            return True
    return False


def rpc_outcome(write: Callable[[], object]) -> str:
    """ "accepted", or the gRPC status code's name the server refused ``write`` with."""
    try:
        write()
    except grpc.RpcError as exc:
        return str(exc.code().name)
    return "accepted"


def update(kind: int, te: sh.TableEntry) -> p4runtime_pb2.Update:
    u = p4runtime_pb2.Update(type=kind)
    u.entity.table_entry.CopyFrom(te.msg())
    return u


def main() -> int:
    address, device_id, p4info = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    out: dict[str, object] = {}
    with tempfile.NamedTemporaryFile(suffix=".bin") as empty:  # the Linux target has no device config
        sh.setup(device_id, address, (0, 10), config=sh.FwdPipeConfig(p4info, empty.name), verbose=False)
    try:
        # -- write, read, modify ------------------------------------------------------------------
        route(ROUTE).insert()
        read = list(sh.TableEntry("usid_route").read())
        out["read"] = [
            [te.msg().match[0].lpm.value.hex(), te.msg().match[0].lpm.prefix_len, te.action.action_name]
            for te in read
        ]
        te = route(ROUTE, port="2")
        te.modify()
        (back,) = sh.TableEntry("usid_route").read()
        out["modified_port"] = int.from_bytes(back.action.msg().params[0].value, "big")
        # -- the default entry, never modified ----------------------------------------------------
        defaults = list(sh.TableEntry("usid_route")(is_default=True).read())
        out["default"] = [[d.is_default, d.action.action_name] for d in defaults]
        # -- errors: one refused update, then a batch of refused updates --------------------------
        try:
            route(ROUTE).insert()
            out["duplicate"] = "accepted"
        except P4RuntimeWriteException as exc:
            out["duplicate"] = write_errors(exc)
            out["duplicate_text"] = str(exc)
        req = p4runtime_pb2.WriteRequest(device_id=device_id)
        req.election_id.low = 10
        req.updates.extend(
            [
                update(p4runtime_pb2.Update.INSERT, route(ROUTE)),
                update(p4runtime_pb2.Update.DELETE, route(MISSING)),
            ]
        )
        try:
            sh.client.write(req)
            out["batch"] = "accepted"
        except P4RuntimeWriteException as exc:
            out["batch"] = write_errors(exc)
        # -- arbitration --------------------------------------------------------------------------
        backup = P4RuntimeClient(device_id, address, (0, 5))
        out["backup_write"] = rpc_outcome(
            lambda: backup.write_update(update(p4runtime_pb2.Update.DELETE, route(ROUTE)))
        )
        entity = p4runtime_pb2.Entity()
        entity.table_entry.table_id = route(ROUTE).msg().table_id
        out["backup_read"] = sum(len(r.entities) for r in backup.read_one(entity))
        higher = P4RuntimeClient(device_id, address, (0, 20))
        out["demoted_write"] = rpc_outcome(route(MISSING).insert)
        higher.tear_down()
        # the server tells the shell's client it is primary again once the other stream is gone
        out["promoted"] = wait_until_primary(sh.client, timeout=10.0)
        out["write_after_takeover"] = rpc_outcome(route(MISSING).insert)
        backup.tear_down()
    finally:
        sh.teardown()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
