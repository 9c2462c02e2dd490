"""mrc-sim's figures name what they draw and do not mislead: every flow line and every run's
bars in a legend, rate axes from zero, each fault line labelled, the EV legend beside the bars."""

from __future__ import annotations

from typing import Any

import pytest

from mrc_host.sim.plots import draw_ev_states, flow_timeline, scenario_figure

FAULT = "blackhole:p0-t0_0-t1_1@30%"


def run(flows: int) -> dict[str, Any]:
    return {
        "timeline_bucket_us": 10.0,
        "elapsed_us": 25.0,
        "faults": [{"start_us": 12.0, "spec": FAULT}],
        "flows": [
            {
                "name": f"f{i}",
                "src": i,
                "dst": 9,
                "mode": "mrc",
                "goodput_timeline_gbps": [92.0, 97.0, 48.5],
                "ev_events": [{"ev": "10040001", "t_us": 13.0, "old": "GOOD", "new": "ASSUMED_BAD"}],
            }
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
            assert drawn == [f"f{i}: h{i} -> h9 (mrc)" for i in range(min(flows, 8))]
            legend = ax.get_legend()
            assert legend is not None and [t.get_text() for t in legend.get_texts()] == drawn
            assert legend.get_title().get_text() == ""  # no "flow" over a line named "flow"
            assert ("first 8 of 12 flows" in ax.get_title()) is (flows > 8)
            assert ax.get_ylim()[0] == 0  # 92 against 97 Gb/s is no collapse
            assert [t.get_text() for t in ax.texts] == [f"fault: {FAULT}"]
        bars = panels[-1].get_legend()
        assert bars is not None and [t.get_text() for t in bars.get_texts()] == ["mrc", "ecmp"]
        ev_panel = panels[2]
        legend = ev_panel.get_legend()
        fig.canvas.draw()
        box, axes_box = legend.get_window_extent(), ev_panel.get_window_extent()
        assert box.x0 >= axes_box.x1  # beside the bars, never over them
    finally:
        plt.close(fig)


def test_the_last_bucket_is_a_rate_over_the_time_it_covered() -> None:
    # a run that ends halfway into its third bucket moved 48.5 Gb/s x 10 us there: 97 Gb/s over 5 us
    assert flow_timeline([92.0, 97.0, 48.5], 10.0, 25.0) == [92.0, 97.0, 97.0]
    assert flow_timeline([92.0, 97.0, 48.5], 10.0, 30.0) == [92.0, 97.0, 48.5]
    assert flow_timeline([], 10.0, 0.0) == []


def test_the_ev_legend_names_the_states() -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        draw_ev_states(ax, {"a": [(0.0, 1.0, "GOOD"), (1.0, 2.0, "ASSUMED_BAD")]}, min_width=0.1)
        legend = ax.get_legend()
        assert legend.get_title().get_text() == "EV state"
        assert [t.get_text() for t in legend.get_texts()] == ["GOOD", "SKIP", "ASSUMED_BAD", "DENIED"]
    finally:
        plt.close(fig)
