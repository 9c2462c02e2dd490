"""mrc view [RUN_DIR] (also mrc-view): the fabric in a web page, live or replayed.

    sudo mrc view                     # the running testbed (runs/latest), live
    mrc view runs/20261124-101500     # a finished run: replay its recording with a time slider
    mrc view runs/sim-demo/           # an mrc-sim run recorded with --record

A run whose controller answers is shown live; any other is replayed from its recordings
(``recording.jsonl``, ``*.recording.jsonl``, or a demo's ``results.json``). The server
listens on 127.0.0.1 only and prints its URL with the access token; Ctrl-C ends it.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from mrc_fabric.stop_wait import wait_for_stop

DEFAULT_RUN = Path("runs/latest")


def build_parser(prog: str = "mrc view") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument(
        "run", nargs="?", type=Path, default=DEFAULT_RUN, help="run directory (default runs/latest)"
    )
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    ap.add_argument("--interval", type=float, default=0.25, help="live: seconds between polls (0.1-5)")
    ap.add_argument("--replay", action="store_true", help="replay the run's recordings even if it is live")
    ap.add_argument("--record", action="store_true", help="live: also record into <run>/view.recording.jsonl")
    return ap


def is_live(run: Path, timeout: float = 2.0) -> bool:
    """Whether the run's controller answers on its socket."""
    sock = run / "controller.sock"
    if not sock.exists():
        return False
    from controller.northbound import ControllerClient

    client = ControllerClient(f"unix:{sock.resolve()}")
    try:
        client.wait_ready(timeout)
        return True
    except Exception:
        return False
    finally:
        client.close()


def start_live(run: Path, port: int = 0, interval: float = 0.25, record: bool = False) -> object:
    """A started :class:`ViewServer` of a live run (the testbed's ``--view`` and CLI verb use it)."""
    from .live import Collector, RunSources
    from .server import ViewServer

    collector = Collector(RunSources.of(run), interval, run / "view.recording.jsonl" if record else None)
    collector.start()
    server = ViewServer(live=collector, port=port)
    try:
        server.start()
    except BaseException:
        collector.stop()
        raise
    return server


def main(argv: list[str] | None = None, prog: str = "mrc view") -> int:
    args = build_parser(prog).parse_args(argv)
    if not 0.1 <= args.interval <= 5:
        print(f"{prog}: --interval must be within 0.1..5 s", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"{prog}: --port must be within 0..65535", file=sys.stderr)
        return 2
    run: Path = args.run
    if not run.exists():
        print(f"{prog}: {run}: no such run directory", file=sys.stderr)
        return 2
    from mrc_fabric.recording import RecordingError

    from .server import ViewServer

    try:
        if not args.replay and run.is_dir() and is_live(run):
            server = start_live(run.resolve(), args.port, args.interval, args.record)
            what = f"live view of {run.resolve().name}"
        else:
            from .replay import load

            server = ViewServer(replays=load(run), port=args.port)
            server.start()
            what = f"replay of {run.resolve().name}"
    except (RecordingError, OSError, ValueError, KeyError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    assert isinstance(server, ViewServer)
    print(f"{what}: {server.url}", flush=True)
    print("(127.0.0.1 only; the token in the URL is required; Ctrl-C to stop)", flush=True)
    try:
        _wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _wait() -> None:
    """Until Ctrl-C or SIGTERM (both end the server the same way). Not ``signal.pause()``:
    a signal the server's thread takes would not wake it (``mrc_fabric.stop_wait``)."""
    signal.signal(signal.SIGTERM, _interrupt)
    wait_for_stop(threading.Event())  # (set by no one: the handler's KeyboardInterrupt ends it)


if __name__ == "__main__":
    sys.exit(main(prog="mrc-view"))
