"""The ways a live run ends because of the machine, each told in a line or a short list
instead of a traceback.

A machine that lacks something (``preflight.PreflightError``), a data plane that cannot run
(``target.TargetError``), a step that ran past its time limit on a slow machine
(``mrc_fabric.time_scale.TimeLimitExceeded``, a gRPC call past its deadline, a socket's wait
that timed out) and a switch
that did not start (its log says why) are the machine's, not a bug: the commands that start a
live fabric (the demo, ``mrc-testbed``, the benches) print :func:`explain`'s text and exit with
:data:`EXIT_HOST`. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import grpc

from mrc_fabric.time_scale import ENV, TimeLimitExceeded, scale

EXIT_HOST = 2
SHIM_LOG_LINES = 4  # of a switch that did not start, the last lines of its log


def explain(exc: BaseException) -> str | None:
    """What to tell the user about ``exc`` if this machine caused it; None for a bug."""
    from topologies.linux_switch import ShimStartError
    from topologies.preflight import PreflightError
    from topologies.target import TargetError

    if isinstance(exc, (PreflightError, TargetError, TimeLimitExceeded)):
        return str(exc)
    if isinstance(exc, grpc.RpcError) and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        s = scale()
        return (
            f"a call ran past its deadline ({exc.details()}): this machine is too slow for the run "
            f"(time limits x{s:g} here; {ENV}={max(2.0, 2 * s):g} allows more)"
        )
    if isinstance(exc, TimeoutError) or isinstance(exc.__cause__, TimeoutError):
        s = scale()
        return (
            f"{exc}: this machine is too slow for the run "
            f"(time limits x{s:g} here; {ENV}={max(2.0, 2 * s):g} allows more)"
        )
    if isinstance(exc, ShimStartError):
        head, *log = str(exc).splitlines()
        return "\n".join([head, *("    " + line for line in log[-SHIM_LOG_LINES:])])
    return None


def run_explained(prog: str, main: Callable[[], int], after: Callable[[], None] | None = None) -> int:
    """``main()``, with a machine's reasons to stop printed as ``prog: ...`` (exit EXIT_HOST)
    and ``after()`` (the run's verdict so far, say) once it stopped; a bug is raised as is."""
    try:
        return main()
    except Exception as exc:
        text = explain(exc)
        if text is None:
            raise
        print(f"{prog}: stopped: {text}", file=sys.stderr, flush=True)
        if after is not None:
            after()
        return EXIT_HOST
