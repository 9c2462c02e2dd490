"""p4runtime-shell as a second client beside the controller: connect, read one table, leave.

Runs in the p4runtime-shell venv (``make p4rt-shell``: it pins an old protobuf). Usage:

    backup_reader.py ADDRESS DEVICE_ID TABLE [HIGH,LOW]

Without an election id p4runtime-shell uses its default, (1,0). Prints JSON: whether the
shell said it is a backup, and how many entries of TABLE it read.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from p4runtime_sh import shell as sh


def main() -> None:
    address, device_id, table = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    election = tuple(int(x) for x in sys.argv[4].split(",")) if len(sys.argv) > 4 else None
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        if election is None:
            sh.setup(device_id=device_id, grpc_addr=address, verbose=False)
        else:
            sh.setup(device_id=device_id, grpc_addr=address, election_id=election, verbose=False)
    try:
        entries = list(sh.TableEntry(table).read())
    finally:
        sh.teardown()
    print(json.dumps({"backup": "not the primary client" in said.getvalue(), "entries": len(entries)}))


if __name__ == "__main__":
    main()
