"""The events as a ledger: checked against the live entities once a stack is quiet.

Clients audit a stack through its resource events, so every physical resource's events must
tell its whole life, whichever traversal lived it: they start with the action that made it
(a create; a replacement is the new version's create) and, once it no longer exists, end with
``DELETE_COMPLETE``; a resource is live under one physical id by its events when it is in
reality. An entity still alive after its resource was let go of (deletion policy
Retain) ends with ``DELETE_COMPLETE`` too, its reason saying it was retained.

Shared by the random-history property test (``tests/engine/test_histories.py``, through the
store) and the storm tests of both tiers (``tests/storm.py``, from the database). Nothing
here uses pytest: :func:`problems` lists what is wrong, each naming the physical id and its
event history; the callers assert it is empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

STACK_TYPE = "OS::Heat::Stack"  # the stack's own events: not a physical resource's
# The actions an event history may start with: a create (a replacement is the new version's
# create), or an update that made anew what vanished behind the engine's back.
MADE_BY = ("CREATE", "UPDATE")
RETAINED = "retained"  # how a Retain policy's DELETE_COMPLETE reason starts


@dataclass(frozen=True, slots=True)
class Entry:
    """One resource event, as the ledger reads it."""

    resource_name: str
    physical_id: str | None
    resource_type: str
    action: str
    status: str
    reason: str
    generation: int

    @property
    def state(self) -> str:
        return f"{self.action}_{self.status}"

    def __str__(self) -> str:
        return f"g{self.generation} {self.resource_name} {self.state} ({self.reason})"


def entries(rows: Iterable[Sequence[object]]) -> list[Entry]:
    """Entries from rows of (resource_name, physical id, resource_type, action, status,
    reason, generation), in event order."""
    return [Entry(str(r[0]), None if r[1] is None else str(r[1]), str(r[2]), str(r[3]),
                  str(r[4]), str(r[5] or ""), int(str(r[6]))) for r in rows]


def histories(events: Iterable[Entry]) -> dict[str, list[Entry]]:
    """Each physical id's resource events, in order (the stack's own events left out)."""
    out: dict[str, list[Entry]] = {}
    for e in events:
        if e.resource_type != STACK_TYPE and e.physical_id:
            out.setdefault(e.physical_id, []).append(e)
    return out


def problems(events: Iterable[Entry], live: Mapping[str, str],
             records: Mapping[str, str] | None = None) -> list[str]:
    """What the events say that reality (``live``: entity id -> a description of it, such as
    its owner or resource name) does not; empty when the ledger is faithful.

    ``records``: physical id -> ``ACTION_STATUS`` of the records that still name one. A
    resource that failed is still the stack's, whatever its plugin left in the cloud (a failed
    create of ``OS::Heat::TestResource`` leaves nothing): its story ends when it is deleted,
    so an id a record holds ``<action>_FAILED`` may end with that action's events.
    """
    found: list[str] = []
    by_id = histories(events)
    held = records or {}
    for physical_id, history in by_id.items():
        first, last = history[0], history[-1]
        if first.action not in MADE_BY:
            found.append(_named(physical_id, history, f"starts with {first.state}, not with "
                                                      f"the action that made it"))
        state = held.get(physical_id, "")
        if state == f"{last.action}_FAILED":
            continue  # still the stack's, failed: its delete is still to come
        if physical_id in live:
            if last.action == "DELETE" and not (
                    last.status == "COMPLETE" and last.reason.startswith(RETAINED)):
                found.append(_named(physical_id, history, f"exists, but its events end with "
                                                          f"{last.state}"))
        elif last.state != "DELETE_COMPLETE":
            found.append(_named(physical_id, history, f"no longer exists, but its events end "
                                                      f"with {last.state}"))
    for physical_id, what in sorted(live.items()):
        if physical_id not in by_id:
            found.append(f"{physical_id} ({what}) exists, but no event names it")
    found.extend(_doubles(by_id, live, held))
    return found


def _doubles(by_id: Mapping[str, list[Entry]], live: Mapping[str, str],
             held: Mapping[str, str]) -> list[str]:
    """A resource live under more physical ids by its events (not ended DELETE_COMPLETE)
    than in reality (a failed one its record still holds counts as live)."""
    alive: dict[str, list[str]] = {}
    for physical_id, history in by_id.items():
        if history[-1].state != "DELETE_COMPLETE":
            alive.setdefault(history[-1].resource_name, []).append(physical_id)
    found: list[str] = []
    for name, ids in sorted(alive.items()):
        real = [i for i in ids if i in live or held.get(i, "").endswith("_FAILED")]
        if len(ids) > 1 and len(ids) != len(real):
            found.append(f"{name} has {len(ids)} physical ids live by its events "
                         f"({', '.join(ids)}), {len(real)} in reality")
    return found


def _named(physical_id: str, history: Sequence[Entry], what: str) -> str:
    return f"{physical_id} {what}: " + " | ".join(str(e) for e in history)
