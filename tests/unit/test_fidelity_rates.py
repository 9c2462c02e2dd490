"""Which link rate a run uses (calibrated, explicit, default), how calibration searches for
it, and which BMv2 build a switch runs -- all without a fabric."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from topologies import bmv2_build
from topologies.fidelity import calibrate, rates
from topologies.fidelity.calibrate import Shape, Step


def entry(rate: float, key: str = "linux/2x2x2x2") -> dict[str, object]:
    return {"key": key, "rate_mbit_s": rate, "when": "2026-01-01T00:00:00Z", "machine": rates.machine()}


def test_an_explicit_rate_wins_and_zero_is_unlimited(tmp_path: Path) -> None:
    cache = tmp_path / rates.CACHE_FILE
    rates.write_entry(cache, "linux/2x2x2x2", entry(80.0))
    assert rates.resolve(33.0, cache, "linux", (2, 2, 2, 2)) == rates.LinkRate(
        33.0, "asked for with --link-rate"
    )
    assert rates.resolve(0.0, cache, "linux", (2, 2, 2, 2)).mbit_s is None
    assert rates.resolve(None, cache, "linux", (2, 2, 2, 2)).mbit_s is None


def test_calibrated_takes_the_shape_then_the_planes_then_the_default(tmp_path: Path) -> None:
    cache = tmp_path / rates.CACHE_FILE
    fallback = rates.resolve(rates.CALIBRATED, cache, "bmv2", (2, 2, 2, 2))
    assert fallback.mbit_s == rates.UNCALIBRATED["bmv2"] and not fallback.calibrated
    assert "not calibrated here for bmv2/2x2x2x2" in fallback.source
    rates.write_entry(cache, "bmv2/4x2x2x2", entry(12.5, "bmv2/4x2x2x2"))
    rates.write_entry(cache, "bmv2/2x2x2x2", entry(20.0, "bmv2/2x2x2x2"))
    exact = rates.resolve(rates.CALIBRATED, cache, "bmv2", (2, 2, 2, 2))
    assert exact.mbit_s == 20.0 and exact.calibrated and "bmv2/2x2x2x2" in exact.source
    near = rates.resolve(rates.CALIBRATED, cache, "bmv2", (4, 2, 4, 2))  # E2's shape: same planes
    assert near.mbit_s == 12.5 and "bmv2/4x2x2x2" in near.source
    assert rates.resolve(rates.CALIBRATED, cache, "linux", (2, 2, 2, 2)).mbit_s == rates.UNCALIBRATED["linux"]


def test_a_calibration_from_another_machine_is_not_used(tmp_path: Path) -> None:
    cache = tmp_path / rates.CACHE_FILE
    other = {**entry(99.0), "machine": {**rates.machine(), "cpus": 128}}
    rates.write_entry(cache, "linux/2x2x2x2", other)
    assert rates.resolve(rates.CALIBRATED, cache, "linux", (2, 2, 2, 2)).mbit_s == rates.UNCALIBRATED["linux"]


def test_the_default_follows_a_slow_machine_and_a_calibration_does_not(tmp_path: Path) -> None:
    """A VM 17x slower than the reference starves its agents at the reference default: the
    default is divided by the slowdown there; noise below the note's threshold changes nothing."""
    cache = tmp_path / rates.CACHE_FILE
    base = rates.UNCALIBRATED["linux"]
    slow = rates.resolve(rates.CALIBRATED, cache, "linux", (2, 2, 2, 2), slowdown=17.3)
    assert slow.mbit_s == pytest.approx(base / 17.3, rel=0.05) and not slow.calibrated
    assert "17.3" in slow.source and "slowdown" in slow.source
    for quiet in (1.0, 1.4):
        assert rates.resolve(rates.CALIBRATED, cache, "linux", (2, 2, 2, 2), slowdown=quiet).mbit_s == base
    bmv2 = rates.resolve(rates.CALIBRATED, cache, "bmv2", (2, 2, 2, 2), slowdown=4.0)
    assert bmv2.mbit_s == pytest.approx(rates.UNCALIBRATED["bmv2"] / 4.0, rel=0.05)
    # what was calibrated on this machine, or asked for, is taken as it is
    rates.write_entry(cache, "linux/2x2x2x2", entry(3.0))
    assert rates.resolve(rates.CALIBRATED, cache, "linux", (2, 2, 2, 2), slowdown=17.3).mbit_s == 3.0
    assert rates.resolve(33.0, cache, "linux", (2, 2, 2, 2), slowdown=17.3).mbit_s == 33.0


def test_the_link_rate_option() -> None:
    assert rates.link_rate_arg("calibrated") == rates.CALIBRATED
    assert rates.link_rate_arg("12.5") == 12.5 and rates.link_rate_arg("0") == 0.0
    for bad in ("fast", "-3"):
        with pytest.raises(argparse.ArgumentTypeError):
            rates.link_rate_arg(bad)


def fake_steps(limit: float, monkeypatch: pytest.MonkeyPatch, noisy_once: float | None = None) -> list[float]:
    """Calibration against a machine that stays faithful up to ``limit`` Mbit/s."""
    tried: list[float] = []

    def step(shape: Shape, rate: float, prefix: str = "cal") -> Step:
        tried.append(rate)
        noisy = noisy_once is not None and rate == noisy_once and tried.count(rate) == 1
        ok = rate <= limit and not noisy
        return Step(rate, ok, "faithful" if ok else "not faithful: x", rate, True, 1.0, 1.0 if noisy else 0.0)

    monkeypatch.setattr(calibrate, "run_step", step)
    return tried


def test_the_search_doubles_then_narrows(monkeypatch: pytest.MonkeyPatch) -> None:
    tried = fake_steps(50.0, monkeypatch)
    steps = calibrate.search(Shape("linux"), say=lambda _m: None)
    assert tried[:4] == [10.0, 20.0, 40.0, 80.0]
    best = calibrate.highest_faithful(steps)
    assert best is not None and 40.0 <= best <= 50.0 and len(tried) == 4 + calibrate.NARROWING


def test_the_search_goes_down_when_the_start_is_too_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_steps(3.0, monkeypatch)
    best = calibrate.highest_faithful(calibrate.search(Shape("bmv2"), say=lambda _m: None))
    assert best is not None and 2.5 <= best <= 3.0


def test_a_step_spoiled_by_other_work_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    tried = fake_steps(50.0, monkeypatch, noisy_once=20.0)
    best = calibrate.highest_faithful(calibrate.search(Shape("linux"), say=lambda _m: None))
    assert tried.count(20.0) == 2 and best is not None and best >= 40.0


def test_calibrate_caches_a_margin_below_the_highest_faithful_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_steps(40.0, monkeypatch)
    cache = tmp_path / rates.CACHE_FILE
    e = calibrate.calibrate(Shape("linux"), cache, say=lambda _m: None)
    assert e["highest_faithful_mbit_s"] == 40.0 and e["rate_mbit_s"] == 40.0 * calibrate.MARGIN
    assert rates.resolve(rates.CALIBRATED, cache, "linux", (2, 2, 2, 2)).mbit_s == 40.0 * calibrate.MARGIN
    png = calibrate.plot([e], tmp_path / "calibration.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_fast_bmv2_build_unless_a_log_needs_the_debug_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    debug = tmp_path / "bin" / bmv2_build.SWITCH_BINARY
    fast = tmp_path / "perf" / "bin" / bmv2_build.SWITCH_BINARY
    for path in (debug, fast):
        path.parent.mkdir(parents=True)
        path.write_text("#!/bin/sh\necho 1.15.5\n")
        path.chmod(0o755)
    monkeypatch.delenv(bmv2_build.FAST_ENV, raising=False)
    monkeypatch.delenv(bmv2_build.BUILD_ENV, raising=False)
    monkeypatch.setenv("PATH", f"{debug.parent}")
    assert bmv2_build.switch_binary("info") == str(fast.resolve())
    assert bmv2_build.switch_binary("debug") == bmv2_build.SWITCH_BINARY  # per-packet log lines
    monkeypatch.setenv(bmv2_build.BUILD_ENV, "debug")
    assert bmv2_build.switch_binary("info") == bmv2_build.SWITCH_BINARY
    monkeypatch.delenv(bmv2_build.BUILD_ENV)
    fast.unlink()
    assert bmv2_build.switch_binary("info") == bmv2_build.SWITCH_BINARY  # no fast build here
