"""What the web view costs the fabric in CPU: ``sudo .venv/bin/python -m bench.bench_view --out results/``.

On the default Linux-target fabric (prefix ``bv``) with a transfer running from h0 to h3
throughout, it alternates rounds with the view off and on (its collector polling every
``--interval`` and one page following the event stream), and measures the CPU time (user +
system, from /proc) that the fabric's processes -- agents, controller, P4Runtime shims --
spend per second of each round, and the view's own (the collector and server threads of
this process). The cost is the on-minus-off difference of the medians; rounds alternate so
that drift on a shared machine hits both. Writes ``view.json`` and ``view.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def fabric_pids(run_dir: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"agent": [], "controller": [], "shim": []}
    for line in (run_dir / "pids").read_text().splitlines():
        d = json.loads(line)
        if d["kind"] in out:
            out[d["kind"]].append(int(d["pid"]))
    return out


def follow(url: str, stop: threading.Event) -> None:
    """A page's event stream, read until ``stop``."""
    port, token = url.split(":")[2].split("/")[0], url.split("token=")[1]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/stream?token={token}", timeout=30) as r:
        while not stop.is_set() and r.readline():
            pass


def measure(pids: dict[str, list[int]], seconds: float) -> dict[str, float]:
    before = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
    own0, t0 = time.process_time(), time.monotonic()
    time.sleep(seconds)
    dt = time.monotonic() - t0
    out = {k: (sum(cpu_seconds(p) for p in v) - before[k]) / dt for k, v in pids.items()}
    out["view_process"] = (time.process_time() - own0) / dt
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_view", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--interval", type=float, default=0.25)
    args = ap.parse_args(argv)
    from mininet.log import setLogLevel

    from mrc_view.cli import start_live
    from topologies.testbed import Testbed, TestbedConfig

    setLogLevel("critical")
    rows: list[dict[str, Any]] = []
    with Testbed(TestbedConfig(prefix="bv", target="linux", latest=False), say=lambda m: None) as tb:
        assert tb.run is not None
        pids = fabric_pids(tb.run.path)
        busy = threading.Event()

        def traffic() -> None:
            while not busy.is_set():
                tb.send("bvh0", "bvh3", 512 << 20)

        th = threading.Thread(target=traffic, daemon=True)
        th.start()
        time.sleep(2)
        for r in range(args.rounds):
            for on in (False, True) if r % 2 == 0 else (True, False):
                server: Any = None
                stop = threading.Event()
                if on:
                    server = start_live(tb.run.path, interval=args.interval)
                    threading.Thread(target=follow, args=(server.url, stop), daemon=True).start()
                    time.sleep(1)
                row: dict[str, Any] = dict(measure(pids, args.seconds))
                if server is not None:
                    lives = server.live.poll_seconds
                    row["poll_s_median"] = {k: statistics.median(v) if v else None for k, v in lives.items()}
                    stop.set()
                    server.stop()
                rows.append({"round": r, "view": on, **row})
                print(f"round {r} view {'on ' if on else 'off'}: " + ", ".join(
                    f"{k} {v:.3f}" for k, v in row.items() if isinstance(v, float)), flush=True)  # fmt: skip
        busy.set()
        th.join(timeout=120)
    result: dict[str, Any] = {"interval_s": args.interval, "rounds": rows, "cost_cpu_per_s": {}}
    for key in ("agent", "controller", "shim", "view_process"):
        with_view = [float(r[key]) for r in rows if r["view"]]
        without = [float(r[key]) for r in rows if not r["view"]]
        result["cost_cpu_per_s"][key] = {
            "off_median": statistics.median(without), "on_median": statistics.median(with_view),
            "delta": statistics.median(with_view) - statistics.median(without),
            "off_range": [min(without), max(without)], "on_range": [min(with_view), max(with_view)],
        }  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "view.json").write_text(json.dumps(result, indent=1) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(result["cost_cpu_per_s"])
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for on in (False, True):
        ax.bar([k + (0.2 if on else -0.2) for k in range(len(keys))],
               [result["cost_cpu_per_s"][k]["on_median" if on else "off_median"] for k in keys],
               width=0.4, label="view on" if on else "view off")  # fmt: skip
    ax.set_xticks(range(len(keys)), keys)
    ax.set_ylabel("CPU seconds per second (median)")
    ax.set_title(f"web view's cost, poll every {args.interval} s, transfer running")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out / "view.png", dpi=100)
    print(json.dumps(result["cost_cpu_per_s"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
