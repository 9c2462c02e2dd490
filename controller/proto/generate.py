#!/usr/bin/env python3
"""Regenerate the controller's gRPC Python code from its .proto (needs grpcio-tools).

Run from anywhere: ``python controller/proto/generate.py``. The generated
``*_pb2.py``/``*_pb2_grpc.py`` are committed, so users need no protoc.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc

REPO = Path(__file__).resolve().parents[2]
PROTO = "controller/proto/mrc/controller/v1/controller.proto"


def main() -> int:
    # -I at the repo root makes the generated imports "controller.proto.mrc.controller.v1...".
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{REPO}",
        f"-I{include}",
        f"--python_out={REPO}",
        f"--pyi_out={REPO}",
        f"--grpc_python_out={REPO}",
        str(REPO / PROTO),
    ]
    rc = protoc.main(args)
    if rc != 0:
        print(f"protoc failed with {rc}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
