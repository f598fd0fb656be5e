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
    # For a poll: the fencing token each node's record had when the poll was scheduled (one
    # per seq). A node whose record has a newer token by then was polled by someone else (a
    # duplicated delivery) and is left out, so duplicates never multiply the polling. The
    # polls of many nodes that fall due together travel in one message.
    expects: tuple[int, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "traversal_id": self.traversal_id,
                                "seqs": list(self.seqs)}
        if self.expects is not None:
            data["expects"] = list(self.expects)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], countdown: float = 0.0) -> Work:
        seqs = tuple(data.get("seqs", ()))
        expects = data.get("expects")
        if expects is None and data.get("expect") is not None:  # one node's poll, as sent
            expects = [data["expect"]] * len(seqs)               # by an earlier version
        return cls(data["kind"], data["traversal_id"], seqs, countdown,
                   None if expects is None else tuple(expects))


def batches(traversal_id: str, seqs: Sequence[int], size: int,
            countdown: float = 0.0) -> Iterator[Work]:
    ordered = sorted(seqs)
    for i in range(0, len(ordered), size):
        yield Work(NODES, traversal_id, tuple(ordered[i:i + size]), countdown)


def polls(traversal_id: str, due: Sequence[tuple[int, int, float]],
          size: int) -> list[Work]:
    """The polls of nodes (seq, fencing token, delay): those due at the same moment (to the
    tenth of a second, or the hundredth below one second) share a message, so a batch of
    servers building together is polled by one message a round rather than one each."""
    grouped: dict[float, list[tuple[int, int]]] = {}
    for seq, token, delay in due:
        moment = round(delay, 2) if delay < 1.0 else round(delay, 1)
        grouped.setdefault(moment, []).append((seq, token))
    out: list[Work] = []
    for moment, nodes in grouped.items():
        nodes.sort()
        for i in range(0, len(nodes), size):
            chunk = nodes[i:i + size]
            out.append(Work(NODES, traversal_id, tuple(s for s, _ in chunk), moment,
                            tuple(t for _, t in chunk)))
    return out


def merge(items: Iterable[Work], size: int) -> list[Work]:
    """Regroup node work of the same traversal and countdown into full batches."""
    grouped: dict[tuple[str, str, float], list[int]] = {}
    others: list[Work] = []
    for w in items:
        if w.kind == NODES and w.expects is None:
            grouped.setdefault((w.kind, w.traversal_id, round(w.countdown, 3)), []).extend(w.seqs)
        else:
            others.append(w)
    out = list(others)
    for (_, tid, countdown), seqs in grouped.items():
        out.extend(batches(tid, seqs, size, countdown))
    return out
