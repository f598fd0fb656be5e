"""Requests on top of each other from several clients at once: a driver shared by the tests of
both tiers (``tests/api/test_concurrent_writers.py``, on a SQLite file;
``tests/integration/test_concurrent_writers_distributed.py``, on PostgreSQL with workers).

Two writers: a stack with parameters ``a`` and ``b``, each the value of an
``OS::Heat::TestResource``. Client A PATCHes ``a`` to 1..N, client B PATCHes ``b`` to 1..N, at
the same time, each with an HTTP client (a connection) of its own and each sending its
requests one after another. A PATCH keeps every parameter it does not name, so when both
have answered 202 to every request the stack must end with ``a = N`` and ``b = N``, in its
parameters and in its resources: a merge that started from a copy older than the last accepted
request would silently undo that request.

Racing creates: several clients POST a stack of one name in one tenant at once: one is created
(201), every other gets 409, and one stack of that name exists.

Nothing here uses pytest: the functions return what happened and :func:`writer_problems`
lists what is wrong.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests import storm

ROUNDS = 15


def two_params_template() -> dict[str, Any]:
    resources = {f"r{p}": {"type": "OS::Heat::TestResource",
                           "properties": {"value": {"get_param": p}}} for p in ("a", "b")}
    outputs = {f"{p}_value": {"value": {"get_attr": [f"r{p}", "output"]}} for p in ("a", "b")}
    return {"heat_template_version": "2018-08-31",
            "parameters": {p: {"type": "string", "default": "0"} for p in ("a", "b")},
            "resources": resources, "outputs": outputs}


@dataclass
class Writers:
    """What the two writers sent, and what the stack ended with."""

    rounds: int
    answers: dict[str, list[int]] = field(default_factory=dict)  # writer -> statuses, in order
    stack: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    live_values: list[str] = field(default_factory=list)  # the live entities' values


def _together(*loops: Any) -> None:
    """Run each callable in a thread of its own, starting together; re-raise the first error."""
    barrier = threading.Barrier(len(loops))
    errors: list[BaseException] = []

    def run(loop: Any) -> None:
        try:
            barrier.wait()
            loop()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(loop,), daemon=True) for loop in loops]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def run_two_writers(base: str, database_url: str, *, rounds: int = ROUNDS,
                    timeout: float = 120.0) -> Writers:
    tenant = f"writers-{uuid.uuid4().hex[:8]}"
    name = f"pair-{uuid.uuid4().hex[:8]}"
    result = Writers(rounds)
    with httpx.Client(base_url=base, timeout=60) as client:
        answer = client.post(f"/v1/{tenant}/stacks", json={
            "stack_name": name, "template": two_params_template()})
        assert answer.status_code == 201, answer.text
        stack_id = answer.json()["stack"]["id"]
        path = f"/v1/{tenant}/stacks/{name}/{stack_id}"
        storm.wait_converged(client, path, timeout)

    def writer(param: str) -> Any:
        def loop() -> None:
            statuses = result.answers.setdefault(param, [])
            with httpx.Client(base_url=base, timeout=60) as own:
                for value in range(1, rounds + 1):
                    sent = own.patch(path, json={"parameters": {param: str(value)}})
                    statuses.append(sent.status_code)
        return loop

    _together(writer("a"), writer("b"))
    with httpx.Client(base_url=base, timeout=60) as client:
        result.stack = storm.wait_converged(client, path, timeout)
        outputs = client.get(f"{path}/outputs").json().get("outputs", [])
        result.outputs = {o["output_key"]: client.get(f"{path}/outputs/{o['output_key']}")
                          .json()["output"].get("output_value") for o in outputs}
    result.live_values = sorted(value for _, value, deleted in
                                storm.entity_rows(database_url, stack_id) if deleted is None)
    return result


def writer_problems(result: Writers) -> list[str]:
    problems = []
    last = str(result.rounds)
    for param, statuses in sorted(result.answers.items()):
        if statuses != [202] * result.rounds:
            problems.append(f"writer {param} was answered {statuses}, not 202 every time")
    if not result.stack.get("stack_status", "").endswith("_COMPLETE"):
        problems.append(f"the stack ended {result.stack.get('stack_status')}: "
                        f"{result.stack.get('stack_status_reason')}")
    parameters = result.stack.get("parameters", {})
    for param in ("a", "b"):
        if parameters.get(param) != last:
            problems.append(f"parameter {param} ended {parameters.get(param)!r}, not its "
                            f"writer's last accepted value {last!r}")
        if result.outputs.get(f"{param}_value") != last:
            problems.append(f"resource r{param} ended with {result.outputs.get(param + '_value')!r}"
                            f", not {last!r}")
    if result.live_values != [last, last]:
        problems.append(f"the live entities hold {result.live_values}, not [{last!r}, {last!r}]")
    return problems


def race_creates(base: str, *, clients: int = 8) -> tuple[list[int], list[dict[str, Any]]]:
    """``clients`` POSTs of one stack name in one tenant at once: their statuses, and the
    tenant's stacks of that name afterwards."""
    tenant = f"race-{uuid.uuid4().hex[:8]}"
    name = f"same-{uuid.uuid4().hex[:8]}"
    body = {"stack_name": name, "template": {
        "heat_template_version": "2018-08-31",
        "resources": {"r": {"type": "OS::Heat::None"}}}}
    statuses: list[int] = []

    def create() -> None:
        with httpx.Client(base_url=base, timeout=60) as own:
            statuses.append(own.post(f"/v1/{tenant}/stacks", json=body).status_code)

    _together(*[create for _ in range(clients)])
    with httpx.Client(base_url=base, timeout=60) as client:
        stacks = client.get(f"/v1/{tenant}/stacks").json()["stacks"]
    return sorted(statuses), [s for s in stacks if s["stack_name"] == name]
