"""Planning a traversal: which nodes, in what order. Pure, and linear in the plan's size.

Called by the engine once per traversal; the result is stored as node rows, so workers never
hold a graph. Nodes are (record, phase):

- ``converge`` for the chosen record of every resource of the new template: create, update,
  replace or leave it;
- ``cleanup`` for every record that existed when planning began: delete it if the new template
  no longer wants it (or it was replaced), otherwise nothing.

Edges, "a before b":

- converge(required) before converge(user), from the new template's dependencies;
- cleanup(user) before cleanup(required), from each record's stored ``requires`` (what it was
  actually built against): a thing is deleted only after everything built on it moved away;
- converge(name) before cleanup(record of that name): a record is looked at for removal only
  after its resource converged (which is when a replacement exists and users are re-pointed).

A DELETE traversal is the same with an empty template: cleanup nodes only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

CONVERGE, CLEANUP = "converge", "cleanup"


@dataclass(frozen=True, slots=True)
class RecordInfo:
    """What the planner needs to know of an existing resource record."""

    id: int
    name: str
    requires: tuple[int, ...] = ()
    replaced_by: int | None = None
    template_id: str | None = None  # the template it last converged to
    intact: bool = False  # converged and untouched since: it may be made current again


@dataclass(slots=True)
class PlannedNode:
    seq: int
    name: str
    phase: str
    record_id: int | None
    pending: int = 0
    successors: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Plan:
    nodes: tuple[PlannedNode, ...]

    @property
    def ready(self) -> list[int]:
        return [n.seq for n in self.nodes if n.pending == 0]


def choose_records(records: Iterable[RecordInfo],
                   target: str | None = None) -> dict[str, RecordInfo]:
    """The record each name converges from: the newest one nothing replaced (the head), unless
    the head is not at ``target`` and an earlier, intact version is: then that version.

    The exception is what a rollback (or an update back to an earlier template) needs: when a
    replacement is rolled back, the original, still in the cloud and exactly as the target
    template wants it, is kept, and the replacement is what gets deleted.
    """
    heads: dict[str, RecordInfo] = {}
    earlier: dict[str, RecordInfo] = {}
    for r in records:
        if r.replaced_by is None:
            best = heads.get(r.name)
            if best is None or r.id > best.id:
                heads[r.name] = r
        elif target is not None and r.template_id == target and r.intact:
            best = earlier.get(r.name)
            if best is None or r.id > best.id:
                earlier[r.name] = r
    chosen = dict(heads)
    for name, r in earlier.items():
        head = heads.get(name)
        if head is None or head.template_id != target:
            chosen[name] = r
    return chosen


def build_plan(
    wanted: Mapping[str, Iterable[str]],
    current: Mapping[str, int],
    records: Sequence[RecordInfo],
    unchanged: frozenset[str] = frozenset(),
) -> Plan:
    """Plan a traversal.

    ``wanted`` maps each resource of the new template to the resources it requires;
    ``current`` gives the record chosen for each wanted name (new resources included: their
    records are inserted before planning); ``records`` are the records that existed before
    this traversal (each gets a cleanup node). ``unchanged``: resources the traversal leaves
    alone (defined alike, as is everything they depend on): neither their converge node nor
    their record's cleanup node is planned, so an update costs what it changes.
    """
    nodes: list[PlannedNode] = []
    converge_seq: dict[str, int] = {}
    for name in wanted:
        if name in unchanged:
            continue
        seq = len(nodes)
        converge_seq[name] = seq
        nodes.append(PlannedNode(seq, name, CONVERGE, current.get(name)))
    kept = {current[name] for name in unchanged if name in current}
    cleanup_seq: dict[int, int] = {}
    for r in records:
        if r.id in kept:
            continue
        seq = len(nodes)
        cleanup_seq[r.id] = seq
        nodes.append(PlannedNode(seq, r.name, CLEANUP, r.id))

    def edge(before: int, after: int) -> None:
        nodes[before].successors.append(after)
        nodes[after].pending += 1

    for name, requires in wanted.items():
        for req in set(requires):
            if req in converge_seq:
                edge(converge_seq[req], converge_seq[name])
    for r in records:
        if r.id in kept:
            continue
        for required in set(r.requires):
            if required in cleanup_seq and required != r.id:
                edge(cleanup_seq[r.id], cleanup_seq[required])
        if r.name in converge_seq:
            edge(converge_seq[r.name], cleanup_seq[r.id])
    return Plan(tuple(nodes))
