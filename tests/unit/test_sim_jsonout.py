"""mrc-sim's JSON writer gives exactly what ``json.dumps(obj, indent=1)`` gives."""

from __future__ import annotations

import enum
import json

import pytest

from mrc_host.sim import jsonout
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.scenario import SimConfig, Simulation


class _Code(enum.IntEnum):
    A = 3


class _Name(enum.StrEnum):
    X = "x"


DOCS: list[object] = [
    {},
    [],
    5,
    "s",
    None,
    1.5,
    {"a": [], "b": {}, "c": [[], {}], 7: 2, 2.5: None, True: False, None: 1.0, "u": 'é\n"x'},
    [float("nan"), float("inf"), -float("inf"), 1e300, -0.0, 12345678901234567890, _Code.A, _Name.X, (1, 2)],
    {"nested": [{"x": [1, {"y": [], "z": {"w": "v"}}]}]},
]


@pytest.mark.parametrize("doc", DOCS)
def test_documents_come_out_as_json_dumps_writes_them(doc: object) -> None:
    assert jsonout.dumps(doc) == json.dumps(doc, indent=1)


def test_a_faulted_run_comes_out_as_json_dumps_writes_it() -> None:
    sim = Simulation(
        SimConfig(shape=FabricShape(planes=2, t1=4), size=1 << 20, faults=["loss=0.01:all"], seed=3)
    )
    result = sim.run()
    assert result["completed"]
    assert jsonout.dumps(result) == json.dumps(result, indent=1)


def test_what_json_refuses_it_refuses_alike() -> None:
    with pytest.raises(TypeError):
        jsonout.dumps({"a": object()})
