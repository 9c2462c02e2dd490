"""Codec speed: the fast template/struct path against scapy build and dissect.

Why: the agent's packet rate is bounded by how fast it turns messages into frames
and back; scapy per packet would cap it near a thousand packets a second. This
measures packets/s on one core for 1 KiB DATA packets (the target workload) and
for SACKs, and writes ``codec.json`` and ``codec.png`` under ``--out``.

    python -m bench.bench_codec --out results/ [--seconds 1.0] [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from scapy.layers.l2 import Ether

from mrc_host.wire.codec import FrameEncoder, decode
from mrc_host.wire.layers import message_from_scapy, to_scapy
from mrc_host.wire.messages import Message, Sack
from mrc_host.wire.samples import SAMPLE_ADDRESSING, SAMPLE_CARRIER, sample_data, sample_messages

TARGETS = {"encode": 200_000, "decode": 150_000}  # packets/s, 1 KiB DATA, one core


@dataclass
class Result:
    op: str  # encode | decode
    impl: str  # fast | fast+icrc-check | scapy
    packet: str  # DATA-1KiB | SACK
    packets_per_s: float
    iterations: int
    seconds: float


def rate(fn: Callable[[], object], seconds: float) -> tuple[float, int, float]:
    """Packets/s of ``fn``: call it in growing batches until ``seconds`` have passed."""
    fn()  # warm caches
    n, batch = 0, 16
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            fn()
        n += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed, n, elapsed
        batch = min(batch * 2, 1 << 16)


def _scapy_encode(msg: Message) -> bytes:
    return bytes(to_scapy(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING))


def _scapy_decode(frame: bytes) -> object:
    return message_from_scapy(Ether(frame))


def measure(seconds: float, scapy_seconds: float) -> list[Result]:
    enc = FrameEncoder(SAMPLE_ADDRESSING)
    carrier16 = SAMPLE_CARRIER.packed
    sack = next(m for m in sample_messages() if isinstance(m, Sack))
    cases: list[tuple[str, Message]] = [("DATA-1KiB", sample_data(1024)), ("SACK", sack)]
    out: list[Result] = []
    for label, msg in cases:
        frame = enc.encode(msg, carrier16)
        assert decode(frame, verify_icrc=True) is not None  # what we time is a valid frame
        runs: list[tuple[str, str, Callable[[], object], float]] = [
            ("encode", "fast", partial(enc.encode, msg, carrier16), seconds),
            ("decode", "fast", partial(decode, frame), seconds),
            ("decode", "fast+icrc-check", partial(decode, frame, verify_icrc=True), seconds),
            ("encode", "scapy", partial(_scapy_encode, msg), scapy_seconds),
            ("decode", "scapy", partial(_scapy_decode, frame), scapy_seconds),
        ]
        for op, impl, fn, secs in runs:
            pps, n, elapsed = rate(fn, secs)
            out.append(Result(op, impl, label, pps, n, elapsed))
            print(f"{label:10s} {op:6s} {impl:16s} {pps:12,.0f} packets/s")
    return out


def plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r.packet}\n{r.op}\n{r.impl}" for r in results]
    colors = ["tab:green" if r.impl.startswith("fast") else "tab:gray" for r in results]
    fig, ax = plt.subplots(figsize=(12, 5))
    bars = ax.bar(range(len(results)), [r.packets_per_s for r in results], color=colors)
    ax.set_yscale("log")
    ax.set_xticks(range(len(results)), labels, fontsize=7)
    ax.set_ylabel("packets/s (one core, log scale)")
    ax.set_title("MRC codec: fast template/struct path vs scapy")
    for name, target in TARGETS.items():
        ax.axhline(target, linestyle="--", linewidth=0.8, color="tab:red")
        ax.text(len(results) - 0.5, target, f"{name} target {target:,}", fontsize=7, ha="right", va="bottom")
    for bar, r in zip(bars, results, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{r.packets_per_s:,.0f}", ha="center",
                va="bottom", fontsize=7)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results"), help="results directory (default results/)")
    ap.add_argument("--seconds", type=float, default=1.0, help="time per fast-path measurement")
    ap.add_argument("--quick", action="store_true", help="short runs (0.2 s each) for CI smoke checks")
    args = ap.parse_args(argv)
    seconds = 0.2 if args.quick else args.seconds
    results = measure(seconds, scapy_seconds=min(seconds, 0.5))
    args.out.mkdir(parents=True, exist_ok=True)
    data_1k = {r.op: r.packets_per_s for r in results if r.packet == "DATA-1KiB" and r.impl == "fast"}
    report = {
        "benchmark": "codec",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "unit": "packets/s on one core",
        "targets": TARGETS,
        "meets_targets": {op: data_1k[op] >= TARGETS[op] for op in TARGETS},
        "results": [asdict(r) for r in results],
    }
    (args.out / "codec.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(results, args.out / "codec.png")
    print(f"wrote {args.out / 'codec.json'} and {args.out / 'codec.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
