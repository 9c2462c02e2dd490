"""mrc-sim's scenario figure names what it draws: every flow line and every run's bars."""

from __future__ import annotations

from typing import Any

import pytest

from mrc_host.sim.plots import scenario_figure


def run(flows: int) -> dict[str, Any]:
    return {
        "timeline_bucket_us": 10.0,
        "elapsed_us": 100.0,
        "faults": [{"start_us": 30.0}],
        "flows": [
            {"name": f"f{i}", "goodput_timeline_gbps": [1.0, 2.0, float(i)], "ev_events": []}
            for i in range(flows)
        ],
        "jobs": {"job": {"background": False, "completion_time_us": 90.0}},
    }


@pytest.mark.parametrize("flows", [3, 12])
def test_every_flow_line_and_every_run_is_in_a_legend(flows: int) -> None:
    import matplotlib.pyplot as plt

    fig = scenario_figure({"scenario": "s", "runs": {"mrc": run(flows), "ecmp": run(flows)}}, max_flows=8)
    try:
        panels = fig.axes
        for ax in panels[:2]:  # one per run
            drawn = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
            assert drawn == [f"f{i}" for i in range(min(flows, 8))]
            legend = ax.get_legend()
            assert legend is not None and [t.get_text() for t in legend.get_texts()] == drawn
            assert ("first 8 of 12 flows" in ax.get_title()) is (flows > 8)
        bars = panels[-1].get_legend()
        assert bars is not None and [t.get_text() for t in bars.get_texts()] == ["mrc", "ecmp"]
    finally:
        plt.close(fig)
