"""Helpers for tests that run the controller in process (unit and live fabrics alike)."""

from __future__ import annotations

from typing import Any


def stop_controller(channel: Any, server: Any, core: Any) -> None:
    """Closes what a test fixture started of the controller, newest first (None: never started)."""
    if channel is not None:
        channel.close()
    if server is not None:
        server.stop(grace=0).wait()
    if core is not None:
        core.stop()
