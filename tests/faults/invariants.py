"""What must hold once the faults stop, read from reality: the ``stacks``, ``resources``,
``traversals`` and ``events`` rows and the ``test_entities`` table (the test backend's
"cloud": one row per entity ``OS::Heat::TestResource`` made, owner ``{stack_id}/{record_id}``,
deleted rows kept with ``deleted_at``).

Callers: the fault tests (they assert :func:`problems` is empty) and ``benchmarks/soak.py``
(it prints the counts). Nothing here uses pytest.

- :func:`wait_quiet`: until every tracked stack is terminal at its generation, no current
  traversal is PLANNING or RUNNING, no lease is held and no orphan (what a step made after
  its lease was taken over) waits to be removed; a bound, not a measurement.
- :func:`problems`: per stack, the terminal state its last accepted request implies (create
  or update: COMPLETE at that generation; delete: DELETE_COMPLETE; a request told to fail:
  FAILED or rolled back); each resource of the current template exactly once in the backend,
  with the template's value, owned by the current record (duplicates); no live entity owned
  by anything else and no orphan left (leaks); every recorded physical id alive (phantoms);
  no lease held, no current traversal unfinished (stuck); a "taken over" event for every
  resource a killed worker left leased (the events tell what happened); the events a faithful
  ledger of the entities (``tests/ledger.py``: every physical id's story from the action that
  made it to its ``DELETE_COMPLETE``, or still alive).
- :func:`reclaimed_after`: how long until no lease a fault left behind is its owner's any
  more (taken over, let go of, claimed again) or its record gone: the recovery time the soak
  reports.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from tests import ledger
from tests.faults.cluster import Fault, FaultCluster
from tests.faults.workload import Tracked

TAKEN_OVER = "taken over"
HANDED_OVER = "handed over"  # let go of by a worker that stops
RUNNING = ("PLANNING", "RUNNING")


@dataclass
class Report:
    """The problems found, by kind (leaked, duplicated, stuck, ...) and in words."""

    counts: Counter[str] = field(default_factory=Counter)
    lines: list[str] = field(default_factory=list)

    def add(self, kind: str, line: str) -> None:
        self.counts[kind] += 1
        self.lines.append(f"[{kind}] {line}")

    def __bool__(self) -> bool:
        return bool(self.lines)

    def __str__(self) -> str:
        return "\n".join(self.lines[:60]) + (f"\n... {len(self.lines) - 60} more"
                                             if len(self.lines) > 60 else "")


def _stacks(cluster: FaultCluster, ids: list[str]) -> dict[str, Any]:
    if not ids:
        return {}
    rows = cluster.query("SELECT s.id, s.name, s.action, s.status, s.status_reason, "
                         "s.generation, s.observed_generation, s.deleted_at, s.traversal_id, "
                         "t.state AS traversal_state FROM stacks s LEFT JOIN traversals t "
                         "ON t.id = s.traversal_id WHERE s.id = ANY(:ids)", ids=ids)
    return {r.id: r for r in rows}


def _settled(t: Tracked, row: Any) -> bool:
    if row is None:
        return t.id is None
    if row.traversal_state in RUNNING:
        return False
    if row.generation != row.observed_generation:
        return False
    if t.deleted:
        return row.deleted_at is not None or row.status == "FAILED"
    return row.status in ("COMPLETE", "FAILED")


def held_leases(cluster: FaultCluster) -> list[Any]:
    return cluster.query("SELECT id, stack_id, name, lease_owner, lease_expires FROM resources "
                         "WHERE lease_owner IS NOT NULL")


def waiting_orphans(cluster: FaultCluster) -> list[Any]:
    return cluster.query("SELECT record_id, stack_id, name, physical_id, attempts "
                         "FROM orphans")


def wait_quiet(cluster: FaultCluster, tracked: list[Tracked], timeout: float,
               period: float = 0.25) -> float | None:
    """Seconds until everything is quiet (see the module docstring); None after ``timeout``."""
    start = time.monotonic()
    ids = [t.id for t in tracked if t.id is not None]
    while True:
        rows = _stacks(cluster, ids)
        if all(_settled(t, rows.get(t.id or "")) for t in tracked) and \
                not held_leases(cluster) and not waiting_orphans(cluster):
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            return None
        time.sleep(period)


def unsettled(cluster: FaultCluster, tracked: list[Tracked]) -> list[str]:
    """Words on what is not quiet yet: for the message of a test that timed out."""
    rows = _stacks(cluster, [t.id for t in tracked if t.id is not None])
    out = []
    for t in tracked:
        row = rows.get(t.id or "")
        if not _settled(t, row):
            out.append(f"{t.name}: " + ("absent" if row is None else
                       f"{row.action}_{row.status} gen {row.observed_generation}/"
                       f"{row.generation} traversal {row.traversal_state} "
                       f"({row.status_reason[:120]})"))
    out += [f"lease held: {r.stack_id}/{r.name} by {r.lease_owner}"
            for r in held_leases(cluster)]
    out += [f"orphan not removed: {o.physical_id} of {o.stack_id}/{o.name} "
            f"({o.attempts} attempts)" for o in waiting_orphans(cluster)]
    return out


def problems(cluster: FaultCluster, tracked: list[Tracked],
             faults: list[Fault] | None = None) -> Report:
    """Every invariant of the module docstring checked; what is wrong, by kind."""
    report = Report()
    ids = [t.id for t in tracked if t.id is not None]
    rows = _stacks(cluster, ids)
    records: dict[str, list[Any]] = defaultdict(list)
    for r in cluster.query("SELECT id, stack_id, name, physical_id, status, action, "
                           "lease_owner, properties FROM resources "
                           "WHERE stack_id = ANY(:ids)", ids=ids):
        records[r.stack_id].append(r)
    entities: dict[str, list[Any]] = defaultdict(list)  # stack id -> live entities
    for e in cluster.query("SELECT id, owner, value FROM test_entities "
                           "WHERE deleted_at IS NULL"):
        entities[e.owner.split("/", 1)[0]].append(e)
    events: dict[str, list[Any]] = defaultdict(list)
    for e in cluster.query("SELECT stack_id, resource_name, physical_resource_id, "
                           "resource_type, action, status, reason, generation FROM events "
                           "WHERE stack_id = ANY(:ids) ORDER BY id", ids=ids):
        events[e.stack_id].append(e)
    for t in tracked:
        _check_stack(report, t, rows.get(t.id or ""), records.get(t.id or "", []),
                     entities.get(t.id or "", []))
        _check_ledger(report, t, rows.get(t.id or ""), records.get(t.id or "", []),
                      entities.get(t.id or "", []), events.get(t.id or "", []))
    for r in held_leases(cluster):
        report.add("stuck", f"lease still held on {r.stack_id}/{r.name} by {r.lease_owner}")
    for o in waiting_orphans(cluster):
        report.add("leaked", f"orphan {o.physical_id} of {o.stack_id}/{o.name} not removed "
                   f"({o.attempts} attempts)")
    _check_takeovers(cluster, report, faults or [])
    return report


def _check_stack(report: Report, t: Tracked, row: Any, records: list[Any],
                 live: list[Any]) -> None:
    where = f"stack {t.name} ({t.id})"
    if row is None:
        if t.id is not None:
            report.add("lost", f"{where}: accepted but not in the database")
        return
    # A delete answers no generation, and a failure's automatic rollback may take one more.
    moved_on = (t.deleted or t.failing is not None) and row.generation > t.generation
    if row.generation != t.generation and not moved_on:
        report.add("lost", f"{where}: generation {row.generation}, the last accepted "
                   f"request got {t.generation}")
    if not _settled(t, row):
        # Mid-traversal, two records per replaced resource and half-made entities are what a
        # traversal in progress looks like: stuck is the finding, the rest would be noise.
        report.add("stuck", f"{where}: {row.action}_{row.status} at "
                   f"{row.observed_generation}/{row.generation}, traversal "
                   f"{row.traversal_state}: {row.status_reason[:200]}")
        return
    # Nothing recorded that does not exist; nothing alive that nobody records.
    live_ids = {e.id: e for e in live}
    recorded = {r.physical_id: r for r in records if r.physical_id is not None}
    for r in records:
        if r.physical_id is not None and r.physical_id not in live_ids:
            report.add("phantom", f"{where}: {r.name} (record {r.id}) records "
                       f"{r.physical_id}, which does not exist")
    for e in live:
        owner_record = e.owner.split("/", 1)[1]
        r = recorded.get(e.id)
        if r is None or str(r.id) != owner_record:
            report.add("leaked", f"{where}: entity {e.id} ({e.value}) of record "
                       f"{owner_record} is recorded by no current record")
    if t.deleted:
        if row.deleted_at is None or row.action != "DELETE" or row.status != "COMPLETE":
            report.add("wrong state", f"{where}: deleted, yet {row.action}_{row.status}")
        return
    if t.failing is None and (row.status != "COMPLETE" or row.action not in
                              ("CREATE", "UPDATE")):
        report.add("wrong state", f"{where}: expected COMPLETE, is {row.action}_{row.status}: "
                   f"{row.status_reason[:200]}")
    if t.failing is not None and row.status == "COMPLETE" and row.action != "ROLLBACK":
        report.add("wrong state", f"{where}: told {t.failing} to fail, yet "
                   f"{row.action}_{row.status}")
    if t.failing is not None:
        return  # what a rollback restores is the last converged template: not checked here
    # Every resource of the template exactly once, with its value, owned by its record.
    by_name: dict[str, list[Any]] = defaultdict(list)
    for e in live:
        r = recorded.get(e.id)
        if r is not None:
            by_name[r.name].append(e)
    for name, res in t.spec.items():
        found = by_name.get(name, [])
        if not found:
            report.add("missing", f"{where}: {name} has no live entity")
        elif len(found) > 1:
            report.add("duplicated", f"{where}: {name} has {len(found)} live entities")
        elif found[0].value != res.value:
            report.add("wrong value", f"{where}: {name} is {found[0].value!r}, the "
                       f"template says {res.value!r}")
    for name in sorted(set(by_name) - set(t.spec)):
        report.add("leaked", f"{where}: {name} is not in the template but exists")
    names = Counter(r.name for r in records)
    for name, n in names.items():
        if n > 1:
            report.add("duplicated", f"{where}: {n} records named {name}")


def _check_ledger(report: Report, t: Tracked, row: Any, records: list[Any], live: list[Any],
                  events: list[Any]) -> None:
    """The stack's events against its entities (``tests/ledger.py``): every physical id's
    story from the action that made it to its ``DELETE_COMPLETE``, or still alive."""
    if row is None or not _settled(t, row):
        return  # reported as lost or stuck already
    entries = ledger.entries((e.resource_name, e.physical_resource_id, e.resource_type,
                              e.action, e.status, e.reason, e.generation) for e in events)
    found = ledger.problems(entries, {e.id: f"{e.value}, of {e.owner}" for e in live},
                            {r.physical_id: f"{r.action}_{r.status}" for r in records
                             if r.physical_id is not None})
    for line in found:
        report.add("ledger", f"stack {t.name} ({t.id}): {line}")


def _check_takeovers(cluster: FaultCluster, report: Report, faults: list[Fault]) -> None:
    """A kill that left leases behind: each such resource has a "taken over" event since."""
    for fault in faults:
        if not fault.kind.startswith("kill -9") or not fault.held:
            continue
        # A pool process killed alone leaves its leases to the sweeper, unless its worker
        # stops first and hands them over.
        events = cluster.query("SELECT stack_id, resource_name FROM events WHERE "
                               "created_at >= :at AND (reason ILIKE :taken OR "
                               "reason ILIKE :handed)", at=fault.at - 1,
                               taken=f"%{TAKEN_OVER}%", handed=f"%{HANDED_OVER}%")
        seen = {(e.stack_id, e.resource_name) for e in events}
        existing = {r.id for r in cluster.query("SELECT id FROM resources WHERE id = ANY(:ids)",
                                                ids=list(fault.held))}
        for rid in fault.held:
            key = (fault.stacks[rid], fault.names[rid])
            if rid in existing and key not in seen:
                report.add("no event", f"{fault.kind} of {fault.target}: lease on "
                           f"{key[0]}/{key[1]} left behind, no '{TAKEN_OVER}' event")


def reclaimed_after(cluster: FaultCluster, fault: Fault, timeout: float,
                    period: float = 0.05) -> float | None:
    """Seconds from the fault until no lease it left is held by its owner any more: taken
    over or let go of (the fencing token bumped), claimed again by another, released by the
    worker's own write (it landed just before the fault), or the record gone. 0 when it left
    none; None after ``timeout``. A record then waiting on a poll (nobody's lease) is in the
    ordinary flow of its action again."""
    waiting = dict(fault.held)
    while waiting:
        rows = cluster.query("SELECT id, fencing_token, lease_owner FROM resources "
                             "WHERE id = ANY(:ids)", ids=list(waiting))
        still = {int(r.id) for r in rows if r.fencing_token == waiting[int(r.id)]
                 and r.lease_owner == fault.owners.get(int(r.id))}
        waiting = {rid: tok for rid, tok in waiting.items() if rid in still}
        if not waiting:
            break
        if time.time() - fault.at > timeout:
            return None
        time.sleep(period)
    return max(0.0, time.time() - fault.at) if fault.held else 0.0
