"""What every example takes on its command line: the data plane, where runs go, a name prefix."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser with the options all examples share (``--help`` shows ``doc``)."""
    text = (doc or "").strip()
    ap = argparse.ArgumentParser(description=text, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--target", default="auto", choices=("auto", "bmv2", "linux"), help="data plane (default auto)"
    )
    ap.add_argument(
        "--runs", type=Path, default=Path("runs"), help="parent of the run directory (default runs)"
    )
    ap.add_argument("--prefix", default="", help="node name prefix (keeps fabrics on one machine apart)")
    return ap


def need_root() -> None:
    """Live fabrics need root (namespaces, veths, raw sockets): say so and stop otherwise."""
    if os.geteuid() != 0:
        sys.exit(f"{sys.argv[0]}: needs root (sudo .venv/bin/python {sys.argv[0]} ...)")
