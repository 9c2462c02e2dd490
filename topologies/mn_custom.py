"""``mn --custom topologies/mn_custom.py``: the testbed inside Mininet's own ``mn``.

::

    sudo .venv/bin/python /usr/bin/mn --custom topologies/mn_custom.py \\
         --topo mrcclos,planes=2,t0=2,t1=2,hosts_per_t0=2,target=auto --controller none

``mn`` builds and starts the Clos from :func:`mn_topo`; its CLI (:func:`mn_cli_class`) then
starts the controller and agents on that net through :meth:`Testbed.adopt`, runs the MRC
CLI and stops them again (mn stops the net). :func:`mn_scoped_cleanup` replaces mn's
machine-wide ``mn -c`` with a cleanup of this process's runs only.
"""

from __future__ import annotations

if __name__ == "builtins":  # pragma: no cover - exec'd by `mn --custom topologies/mn_custom.py`
    # mn exec()s this file without __name__/__file__ and copies every global it defines into
    # its own namespace: find the repository from the code object, make the project (and its
    # venv, when mn runs under the system python) importable here and in every child process,
    # import the real module, and (at the end of the file) leave mn only what it needs.
    # Any Exception raised while mn builds makes mn run its machine-wide `mn -c`, which would
    # wreck other Mininet users on this machine: errors here leave through SystemExit instead.
    import glob as _glob
    import inspect as _inspect
    import os as _os
    import sys as _sys
    from pathlib import Path as _Path

    _repo = _Path(_inspect.currentframe().f_code.co_filename).resolve().parent.parent  # type: ignore[union-attr]
    _paths = [str(_repo), *sorted(_glob.glob(str(_repo / ".venv" / "lib" / "python3*" / "site-packages")))]
    for _p in reversed(_paths):
        if _p not in _sys.path:
            _sys.path.insert(1, _p)
    _os.environ["PYTHONPATH"] = _os.pathsep.join([*_paths, *filter(None, [_os.environ.get("PYTHONPATH")])])
    try:
        import topologies.mn_custom  # the real module: fails here, not halfway through
    except Exception as _exc:
        print(
            f"topologies/mn_custom.py: cannot import the project ({_exc}); run `make setup` and start mn "
            "with the venv's python: sudo .venv/bin/python /usr/bin/mn --custom topologies/mn_custom.py ...",
            file=_sys.stderr,
        )
        raise SystemExit(2) from None

import os
import sys
from pathlib import Path
from typing import Any

from topologies.rundir import RunDir, proc_start_time
from topologies.target import choose_target
from topologies.testbed import Testbed, TestbedConfig, announce, summary

_MN_RUNS: list[RunDir] = []  # runs this mn process created, for mn_scoped_cleanup


def mn_topo(
    planes: int = 2,
    t0: int = 2,
    t1: int = 2,
    hosts_per_t0: int = 2,
    target: str = "auto",
    link_rate: float = 0,
    prefix: str = "",
    runs: str = "runs",
) -> Any:
    """``--topo mrcclos,planes=..,t0=..,t1=..,hosts_per_t0=..,target=..,link_rate=..,prefix=..,runs=..``."""
    try:
        from mrc_fabric.topology import build_clos
        from topologies import preflight
        from topologies.clos import TOPOLOGY_FILE, ClosTopo

        choice = choose_target(target)
        announce(choice.banner())
        topology = build_clos(planes, t0, t1, hosts_per_t0, prefix=prefix, target=choice.target)
        preflight.require(choice.target, Path(runs), preflight.root_ifnames(topology))
        run = RunDir.create(Path(runs))
        _MN_RUNS.append(run)
        announce(f"run directory: {run.path}")
        # owned by this mn process from now on (adopt() rewrites it with the full config), so
        # that neither cleanup nor pruning by another process takes it for a crashed run
        run.write_run_info({"pid": os.getpid(), "pid_start_time": proc_start_time(os.getpid())})
        topology.save(run.path / TOPOLOGY_FILE)  # interface names for cleanup, even if start fails
        link_opts = None
        if link_rate:
            from topologies.rate_link import RateLink

            link_opts = {"cls": RateLink, "bw": float(link_rate)}
        topo = ClosTopo(topology, choice.switch_cls, str(run.path), link_opts)
    except Exception as exc:  # SystemExit: see the top of the file
        print(f"mrcclos: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    topo.mrc = (topology, run, choice, float(link_rate))  # picked up by the CLI once mn started the net
    return topo


def mn_scoped_cleanup() -> None:
    """Replaces mn's ``cleanup`` (its ``mn -c``) while this file is loaded: only our runs."""
    from topologies.cleanup import Report, clean_run

    report = Report()
    for run in _MN_RUNS:
        clean_run(run.path, report)
    for line in report.lines():
        announce(line)
    announce("Mininet's machine-wide cleanup (mn -c) was NOT run: other Mininet users may share this machine")


def mn_cli_class() -> type:
    """mn's ``CLI``: brings up controller and agents on mn's net, runs the MRC CLI, stops them."""
    from topologies.cli import MrcCLI
    from topologies.clos import finish_start

    class MnMrcCLI(MrcCLI):
        def __init__(self, mininet: Any, *args: Any, **kwargs: Any) -> None:
            mrc = getattr(getattr(mininet, "topo", None), "mrc", None)
            if mrc is None or kwargs.get("script"):
                super().__init__(mininet, *args, **kwargs)
                return
            topology, run, choice, link_rate = mrc
            tb = Testbed(
                TestbedConfig(
                    planes=topology.planes,
                    t0=topology.t0_per_plane,
                    t1=topology.t1_per_plane,
                    hosts_per_t0=topology.hosts_per_t0,
                    target=choice.target.value,
                    runs_root=run.path.parent,
                    link_rate=link_rate or None,
                )
            )
            tb.rate_source = "link_rate= in --topo" if link_rate else "no link_rate= in --topo mrcclos,..."
            try:
                finish_start(mininet, topology, run.path)
                tb.adopt(mininet, topology, run, choice)
            except Exception as exc:  # back to mn, which stops the net (no mn -c: see the top)
                announce(f"the MRC testbed did not come up: {exc}")
                tb.stop()
                return
            try:
                print(summary(tb), flush=True)
                super().__init__(mininet, *args, testbed=tb, **kwargs)
            except SystemExit:  # SIGTERM/SIGHUP: return normally so that mn still stops the net
                announce("terminated: stopping the fabric")
            finally:
                tb.stop()  # controller and agents; mn stops the net itself

    return MnMrcCLI


def mn_install(namespace: dict[str, Any]) -> None:
    """Leave mn's exec namespace holding only ``topos``, ``CLI`` and ``cleanup``.

    mn copies every global of a custom file into its own module; ``cleanup`` thereby replaces
    mn's machine-wide ``mn -c`` (which it runs on any error) with one limited to our runs.
    """
    exports = {"topos": {"mrcclos": mn_topo}, "CLI": mn_cli_class(), "cleanup": mn_scoped_cleanup}
    for name in [n for n in namespace if not n.startswith("__")]:
        del namespace[name]
    namespace.update(exports)


if __name__ == "builtins":  # pragma: no cover - see the top of the file
    import topologies.mn_custom

    topologies.mn_custom.mn_install(globals())
