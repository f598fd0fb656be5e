"""What every dispatcher offers: accept work items, to be run after their countdown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from convergence.engine.work import Work


class Dispatcher(Protocol):
    def dispatch(self, work: Sequence[Work]) -> None:
        """Queue work; called only after the transaction that made it ready has committed."""
        ...
