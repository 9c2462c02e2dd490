"""The controller's northbound client, for the testbed and its CLI (it lives in controller/)."""

from controller.northbound import (
    DIRECTIONS,
    KINDS,
    ControllerClient,
    CounterCell,
    direction_name,
    kind_name,
)

__all__ = ["DIRECTIONS", "KINDS", "ControllerClient", "CounterCell", "direction_name", "kind_name"]
