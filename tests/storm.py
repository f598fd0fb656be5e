"""The autoscaler storm (scenario 6 of the overlapping updates): a driver shared by the tests
(``tests/api/test_storm.py``, ``tests/integration/test_storm_distributed.py``) and the
benchmark (``benchmarks/storm.py``).

A "group" of ``OS::Heat::TestResource`` members m0..m39 driven by a ``count`` parameter: there
is no ``OS::Heat::ResourceGroup`` yet, so member ``i`` exists when the condition ``has_i``
(yaql: ``count > i``) holds. The stack is created with ``count`` 20; then several clients, each
with an HTTP client of its own, send ``PATCH /v1/{tenant}/stacks/{name}/{id}`` with
``{"parameters": {"count": N}}`` (an update with the existing template) at seeded random
moments and values. Each 202 answers the generation it was given; the last accepted request is
the one with the highest generation. Then the stack is watched (``GET``) until it is terminal
at that generation.

What the storm leaves is read from reality: the API's resource list and the ``test_entities``
table (what ``OS::Heat::TestResource`` created; deleted rows are kept with ``deleted_at``, so
every creation is counted). A member may be created at most as often as the requests required:
once for the initial create if ``i < 20``, plus once each time, in generation order, ``N > i``
turned from false to true. A request answered with a server error (5xx) or not at all is a
problem too: refusing an update is the API's right (a 4xx), failing on it is not. The stack's
events must be a faithful ledger of the entities (``tests/ledger.py``): every physical id's
events run from its create to its ``DELETE_COMPLETE``, or it is still alive.

Nothing here uses pytest: :func:`problems` lists what is wrong, the tests assert it is empty and
the benchmark prints it.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from tests import ledger

MEMBERS = 40
INITIAL = 20
REQUESTS = 50
CLIENTS = 3
SPREAD_SECONDS = 10.0
POLL_SECONDS = 0.05
TERMINAL = ("_COMPLETE", "_FAILED")


def template(members: int = MEMBERS, create_wait: float = 0.5,
             delete_wait: float = 0.5) -> dict[str, Any]:
    """The group: member ``m<i>`` (value ``m<i>``) exists when ``count > i``."""
    conditions = {f"has_{i}": {"yaql": {"expression": f"$.data.n > {i}",
                                        "data": {"n": {"get_param": "count"}}}}
                  for i in range(members)}
    resources = {f"m{i}": {"type": "OS::Heat::TestResource", "condition": f"has_{i}",
                           "properties": {"value": f"m{i}",
                                          "action_wait_secs": {"create": create_wait,
                                                               "delete": delete_wait}}}
                 for i in range(members)}
    return {"heat_template_version": "2018-08-31",
            "parameters": {"count": {"type": "number", "default": INITIAL}},
            "conditions": conditions, "resources": resources}


@dataclass(frozen=True)
class Sent:
    """One PATCH: who sent it, the count asked for, the answer."""

    client: int
    count: int
    status: int  # 0: no answer (a transport error; the outcome is unknown)
    generation: int | None  # from a 202
    answered: float  # time.monotonic() when the answer arrived
    body: str = ""


@dataclass
class Storm:
    """What a storm did and what it left."""

    tenant: str
    name: str
    stack_id: str
    members: int
    initial: int
    sent: list[Sent] = field(default_factory=list)
    stack: dict[str, Any] = field(default_factory=dict)  # GET stack at the end
    resources: list[dict[str, Any]] = field(default_factory=list)  # the API's resource list
    entities: list[tuple[str, str, float | None]] = field(default_factory=list)  # owner, value,
    # deleted_at: every entity the stack's members ever created
    # The stack's events (name, physical id, action, status, reason, generation, resource
    # type), in order: what a wrong end state is read from, and the ledger checked.
    events: list[tuple[Any, ...]] = field(default_factory=list)
    live_ids: dict[str, str] = field(default_factory=dict)  # live entity id -> value
    tail_seconds: float = 0.0  # the last answer -> the stack seen converged
    tail_last_generation_seconds: float = 0.0  # the highest generation's answer -> converged

    @property
    def accepted(self) -> list[Sent]:
        """The accepted requests, in generation order."""
        return sorted((s for s in self.sent if s.generation is not None),
                      key=lambda s: s.generation or 0)

    @property
    def last(self) -> Sent:
        return self.accepted[-1]

    def created(self) -> Counter[str]:
        """Entities ever created per value (``m<i>``)."""
        return Counter(value for _, value, _ in self.entities)

    def live(self) -> Counter[str]:
        """Live entities per value."""
        return Counter(value for _, value, deleted in self.entities if deleted is None)

    def required(self) -> dict[str, int]:
        """Per member, the creations the accepted requests required (see the module doc)."""
        counts = [self.initial] + [s.count for s in self.accepted]
        needed: dict[str, int] = {}
        for i in range(self.members):
            flips = sum(1 for before, after in pairwise(counts)
                        if before <= i < after)
            needed[f"m{i}"] = flips + (1 if self.initial > i else 0)
        return needed


def _path(tenant: str, name: str, stack_id: str) -> str:
    return f"/v1/{tenant}/stacks/{name}/{stack_id}"


def create_group(client: httpx.Client, tenant: str, name: str, count: int = INITIAL,
                 members: int = MEMBERS, timeout: float = 120.0) -> str:
    """Create the group stack with ``count`` members and wait for CREATE_COMPLETE."""
    answer = client.post(f"/v1/{tenant}/stacks", json={
        "stack_name": name, "template": template(members), "parameters": {"count": count}})
    if answer.status_code != 201:
        raise AssertionError(f"create answered {answer.status_code}: {answer.text}")
    stack_id = str(answer.json()["stack"]["id"])
    stack = wait_converged(client, _path(tenant, name, stack_id), timeout)
    if stack["stack_status"] != "CREATE_COMPLETE":
        raise AssertionError(f"create ended {stack['stack_status']}: "
                             f"{stack['stack_status_reason']}")
    return stack_id


def wait_converged(client: httpx.Client, path: str, timeout: float) -> dict[str, Any]:
    """GET the stack until it is terminal at its current generation; raise after ``timeout``
    (a guard against a stuck stack, not a measure)."""
    deadline = time.monotonic() + timeout
    while True:
        stack: dict[str, Any] = client.get(path).json()["stack"]
        if str(stack["stack_status"]).endswith(TERMINAL) and \
                stack["observed_generation"] == stack["generation"]:
            return stack
        if time.monotonic() > deadline:
            raise AssertionError(f"stack still {stack['stack_status']} at observed generation "
                                 f"{stack['observed_generation']} of {stack['generation']} "
                                 f"after {timeout} s")
        time.sleep(POLL_SECONDS)


def schedule(seed: int, requests: int = REQUESTS, clients: int = CLIENTS,
             seconds: float = SPREAD_SECONDS,
             members: int = MEMBERS) -> list[list[tuple[float, int]]]:
    """Per client, its (moment after the start, count) pairs: ``requests`` moments drawn
    uniformly over ``seconds``, dealt round robin, counts uniform in 0..members."""
    rng = random.Random(seed)
    moments = sorted(rng.uniform(0, seconds) for _ in range(requests))
    per_client: list[list[tuple[float, int]]] = [[] for _ in range(clients)]
    for k, at in enumerate(moments):
        per_client[k % clients].append((at, rng.randint(0, members)))
    return per_client


def send_storm(base: str, path: str, plan: list[list[tuple[float, int]]]) -> list[Sent]:
    """Each client in a thread of its own, with an HTTP client of its own, sends its PATCHes at
    their moments (at once when late)."""
    sent: list[Sent] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    start = time.monotonic() + 0.2  # every thread ready before the first moment

    def client_loop(index: int, items: list[tuple[float, int]]) -> None:
        try:
            with httpx.Client(base_url=base, timeout=60) as client:
                for at, count in items:
                    delay = start + at - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    try:
                        answer = client.patch(path, json={"parameters": {"count": count}})
                    except httpx.TransportError as exc:  # no answer: outcome unknown
                        with lock:
                            sent.append(Sent(index, count, 0, None, time.monotonic(),
                                             f"{type(exc).__name__}: {exc}"))
                        continue
                    answered = time.monotonic()
                    generation = answer.json()["stack"]["generation"] \
                        if answer.status_code == 202 else None
                    with lock:
                        sent.append(Sent(index, count, answer.status_code, generation,
                                         answered, "" if generation is not None else answer.text))
        except BaseException as exc:  # reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=client_loop, args=(i, items), daemon=True)
               for i, items in enumerate(plan)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return sent


def entity_rows(database_url: str, stack_id: str) -> list[tuple[str, str, float | None]]:
    """Every ``test_entities`` row of the stack (owner ``<stack id>/<record id>``), deleted
    ones included: (owner, value, deleted_at)."""
    return [(r.owner, r.value, r.deleted_at) for r in _rows(
        database_url, "SELECT owner, value, deleted_at FROM test_entities WHERE owner LIKE "
        ":prefix ORDER BY created_at", prefix=f"{stack_id}/%")]


def live_entity_ids(database_url: str, stack_id: str) -> dict[str, str]:
    """The stack's live ``test_entities``: entity id (a member's physical id) -> value."""
    return {r.id: r.value for r in _rows(
        database_url, "SELECT id, value FROM test_entities WHERE owner LIKE :prefix AND "
        "deleted_at IS NULL", prefix=f"{stack_id}/%")}


def event_rows(database_url: str, stack_id: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in _rows(
        database_url, "SELECT resource_name, physical_resource_id, action, status, reason, "
        "generation, resource_type FROM events WHERE stack_id = :stack ORDER BY id",
        stack=stack_id)]


def _rows(database_url: str, query: str, **params: Any) -> list[Any]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(query), params).all())
    finally:
        engine.dispose()


def run_storm(base: str, database_url: str, *, seed: int = 6, tenant: str | None = None,
              requests: int = REQUESTS, clients: int = CLIENTS,
              seconds: float = SPREAD_SECONDS, members: int = MEMBERS,
              initial: int = INITIAL, timeout: float = 120.0) -> Storm:
    """Create the group, send the storm, wait for the stack to converge, read what is left."""
    tenant = tenant or f"storm-{uuid.uuid4().hex[:8]}"
    name = f"group-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=base, timeout=60) as client:
        stack_id = create_group(client, tenant, name, initial, members, timeout)
        path = _path(tenant, name, stack_id)
        storm = Storm(tenant, name, stack_id, members, initial)
        storm.sent = send_storm(base, path, schedule(seed, requests, clients, seconds, members))
        if not storm.accepted:
            raise AssertionError(f"no request was accepted: {storm.sent}")
        storm.stack = wait_converged(client, path, timeout)
        converged = time.monotonic()
        storm.tail_seconds = converged - max(s.answered for s in storm.sent)
        storm.tail_last_generation_seconds = converged - storm.last.answered
        storm.resources = client.get(f"{path}/resources").json()["resources"]
    storm.entities = entity_rows(database_url, stack_id)
    storm.live_ids = live_entity_ids(database_url, stack_id)
    storm.events = event_rows(database_url, stack_id)
    return storm


def problems(storm: Storm) -> list[str]:
    """What is wrong with the end state; empty when the storm converged as required."""
    found: list[str] = []
    failed = [(s.status, s.body[:300]) for s in storm.sent
              if s.status == 0 or s.status >= 500]
    if failed:
        found.append(f"requests answered with a server error or not at all: {failed}")
    last = storm.last
    expected = [f"m{i}" for i in range(last.count)]
    stack = storm.stack
    if stack["stack_status"] != "UPDATE_COMPLETE":
        found.append(f"stack {stack['stack_status']}: {stack['stack_status_reason']}")
    if stack["generation"] != last.generation:
        found.append(f"stack at generation {stack['generation']}, the last accepted request "
                     f"had {last.generation}")
    if stack["parameters"].get("count") != str(last.count):
        found.append(f"stack parameter count {stack['parameters'].get('count')!r}, the last "
                     f"accepted request asked for {last.count}")
    names = sorted((r["resource_name"] for r in storm.resources), key=_member_index)
    if names != expected:
        found.append(f"resources {names}, expected {expected}")
    not_complete = {r["resource_name"]: r["resource_status"] for r in storm.resources
                    if not str(r["resource_status"]).endswith("_COMPLETE")}
    if not_complete:
        found.append(f"resources not COMPLETE: {not_complete}")
    live = storm.live()
    if live != Counter(expected):
        found.append(f"live entities {dict(sorted(live.items(), key=_item_index))}, expected "
                     f"one each of {expected}")
        for name in sorted(set(expected) ^ set(live), key=_member_index)[:3]:
            found.append(_trail(storm, name))
    created, required = storm.created(), storm.required()
    over = {v: (created[v], required[v]) for v in required if created[v] > required[v]}
    if over:
        found.append(f"members created more often than required (created, required): {over}")
    strays = sorted(set(created) - set(required))
    if strays:
        found.append(f"entities of values no member has: {strays}")
    found.extend(f"ledger: {p}" for p in ledger.problems(
        ledger.entries((e[0], e[1], e[6], e[2], e[3], e[4], e[5]) for e in storm.events),
        storm.live_ids, {r["physical_resource_id"]: r["resource_status"]
                         for r in storm.resources if r.get("physical_resource_id")}))
    return found


def _trail(storm: Storm, name: str) -> str:
    """A member's story, for a wrong end state: its records, entities and last events."""
    records = [(r.get("physical_resource_id"), r.get("resource_status"))
               for r in storm.resources if r["resource_name"] == name]
    entities = [(owner.rsplit("/", 1)[-1], deleted is not None)
                for owner, value, deleted in storm.entities if value == name]
    events = [f"g{e[5]} {e[2]}_{e[3]} {e[1]} {e[4]}" for e in storm.events if e[0] == name]
    return (f"{name}: records {records}; entities (record, deleted) {entities[-6:]}; last "
            f"events: " + " | ".join(events[-12:]))


def summary(storm: Storm) -> str:
    """The figures of a storm, for the benchmark and for failure messages."""
    created, required = storm.created(), storm.required()
    refused = [(s.status, s.body[:200]) for s in storm.sent if s.generation is None]
    lines = [
        f"requests sent {len(storm.sent)}, accepted {len(storm.accepted)}"
        + (f", refused {refused}" if refused else ""),
        f"counts in generation order (from {storm.initial}): "
        + " ".join(f"{s.generation}:{s.count}" for s in storm.accepted),
        f"last accepted: generation {storm.last.generation}, count {storm.last.count}",
        f"stack {storm.stack.get('stack_status')} at generation "
        f"{storm.stack.get('generation')}",
        f"last answer -> converged: {storm.tail_seconds:.2f} s; highest generation's answer "
        f"-> converged: {storm.tail_last_generation_seconds:.2f} s",
        f"entities created {sum(created.values())}, required at most "
        f"{sum(required.values())}; live {sum(storm.live().values())}",
    ]
    return "\n".join(lines)


def _member_index(name: str) -> int:
    return int(name[1:]) if name[:1] == "m" and name[1:].isdigit() else 10**6


def _item_index(item: tuple[str, int]) -> int:
    return _member_index(item[0])
