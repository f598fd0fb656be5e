"""Work items: what a dispatcher carries between steps. Ids only, JSON-friendly.

A value type of the dispatch port (:mod:`convergence.ports.dispatch`): the engine makes and
executes them (``convergence.engine``), the services start traversals with them, the
dispatchers (``convergence.dispatch``) carry them and the worker process
(``convergence.workers``) runs them.

A ``plan`` item asks for a traversal to be planned; a ``nodes`` item carries a batch of ready
nodes of one traversal (each node's step stays independent and idempotent: a batch is only a
way to pay the per-message and per-commit cost once for many nodes).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

PLAN, NODES, FINISH = "plan", "nodes", "finish"


@dataclass(frozen=True, slots=True)
class Work:
    kind: str
    traversal_id: str
    seqs: tuple[int, ...] = ()
    countdown: float = 0.0
    # For a poll: the fencing token its record had when the poll was scheduled. A copy of the
    # message that arrives after someone else already polled finds a newer token and stops,
    # so duplicated deliveries never multiply the polling.
    expect: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "traversal_id": self.traversal_id,
                                "seqs": list(self.seqs)}
        if self.expect is not None:
            data["expect"] = self.expect
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], countdown: float = 0.0) -> Work:
        return cls(data["kind"], data["traversal_id"], tuple(data.get("seqs", ())), countdown,
                   data.get("expect"))


def batches(traversal_id: str, seqs: Sequence[int], size: int,
            countdown: float = 0.0) -> Iterator[Work]:
    ordered = sorted(seqs)
    for i in range(0, len(ordered), size):
        yield Work(NODES, traversal_id, tuple(ordered[i:i + size]), countdown)


def merge(items: Iterable[Work], size: int) -> list[Work]:
    """Regroup node work of the same traversal and countdown into full batches."""
    grouped: dict[tuple[str, str, float], list[int]] = {}
    others: list[Work] = []
    for w in items:
        if w.kind == NODES and w.expect is None:
            grouped.setdefault((w.kind, w.traversal_id, round(w.countdown, 3)), []).extend(w.seqs)
        else:
            others.append(w)
    out = list(others)
    for (_, tid, countdown), seqs in grouped.items():
        out.extend(batches(tid, seqs, size, countdown))
    return out
