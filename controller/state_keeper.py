"""The controller's side of its state files: read them at start, say what they held, and make
each change durable before it is made (``state_store.StateStore`` writes).

Why its own owner: the core's faults and routes only need "is this change on disk?" -- a yes, or
a refusal to pass on -- and what the files held at start. How the files are read, what damage
cost, where it was kept and how the writer recovers from a full disk live behind this class.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from controller.events import EventBus
from controller.state_file import Recovered, recover_state
from controller.state_store import StateStore, StateUnavailable

__all__ = ["StateKeeper", "StateUnavailable"]

log = logging.getLogger(__name__)


class StateKeeper:
    """One state file (or none: then nothing is kept and nothing refused)."""

    def __init__(self, path: Path | None, events: EventBus) -> None:
        self.path = path
        self.events = events
        self.store: StateStore | None = None
        self.recovery = Recovered(None, "none")  # how the state was found at start

    def open(self) -> Recovered:
        """What the files hold (damage kept aside and said: logged and as events), and a writer
        that goes on from there. Never raises: a file it cannot write refuses changes later."""
        assert self.path is not None
        for stale in self.path.parent.glob(f".{self.path.name}*.tmp"):  # a write a crash cut short
            stale.unlink(missing_ok=True)
        found = recover_state(self.path)
        self.recovery = found
        for lost in found.lost:
            log.error("state file %s: %s", self.path, lost)
            self.events.publish("state_damaged", message=f"{self.path.name}: {lost}"[:300])
        if found.source == "unreadable":
            found.notes.append("reading the switches' own tables back instead")
        for note in found.notes:
            log.warning("state file: %s", note)
            self.events.publish("state_recovered", message=note[:300])
        self.store = StateStore(self.path, found, self._said)
        return found

    def _said(self, error: str) -> None:
        """The writer failed (every change refused until it works again), or works again."""
        if error:
            said = f"{error}; changes refused until it can be written"
            self.events.publish("state_unavailable", message=said[:300])
        else:
            self.events.publish("state_writable", message=f"{self.path}: written again")

    def commit(self, record: dict[str, Any]) -> None:
        """Durable on return; StateUnavailable (and then nowhere on disk) if it cannot be."""
        if self.store is not None:
            self.store.commit(record)

    def keep(self, record: dict[str, Any]) -> None:
        """Written with the next batch that can be (nobody waits for it)."""
        if self.store is not None:
            self.store.submit(record, kept=True)

    def stop(self) -> None:
        if self.store is not None:
            self.store.stop()
