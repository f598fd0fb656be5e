"""A scenario harness: a stack engine on a real store and dispatcher, told as stories.

Used by the embedded tier (SQLite + in-process dispatcher + manual clock) and the integration
tier (PostgreSQL + Redis + real worker processes), which run the same scenarios.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from convergence.plugins.heat.test_backend import TEST_ENTITIES, TableTestEntities
from convergence.ports.views import EventView, RecordView, StackView
from convergence.runtime import Runtime
from convergence.services import queries, stacks

TENANT = "tenant-a"


def hot(body: str) -> str:
    return "heat_template_version: 2018-08-31\nresources:\n" + textwrap.indent(
        textwrap.dedent(body).strip("\n"), "  ") + "\n"


def res(value: Any = None, *, depends_on: list[str] | None = None,
                  **props: Any) -> dict[str, Any]:
    properties = dict(props)
    if value is not None:
        properties["value"] = value
    body: dict[str, Any] = {"type": "OS::Heat::TestResource", "properties": properties}
    if depends_on:
        body["depends_on"] = depends_on
    return body


def template(resources: dict[str, dict[str, Any]], outputs: dict[str, Any] | None = None) -> str:
    import json

    doc: dict[str, Any] = {"heat_template_version": "2018-08-31", "resources": resources}
    if outputs:
        doc["outputs"] = outputs
    return json.dumps(doc)


# Template T of the engine's scenarios: A, B; C (value 4alpha) depends on A and B; D refers
# to C; E takes C's output.
T = {
    "A": res("a"),
    "B": res("b"),
    "C": res("4alpha", depends_on=["A", "B"]),
    "D": res({"get_resource": "C"}),
    "E": res({"get_attr": ["C", "output"]}),
}


def entity_backend(rt: Runtime) -> TableTestEntities:
    """The runtime's OS::Heat::TestResource backend: what the stacks' resources made."""
    entities: TableTestEntities = rt.registry.backends[TEST_ENTITIES]
    return entities


class Waiter(Protocol):
    def __call__(self, stack_id: str) -> StackView: ...


@dataclass
class Story:
    """One stack's story: act, wait, and look at what is real."""

    rt: Runtime
    name: str
    wait: Waiter
    id: str | None = None

    def create(self, text: str, **kwargs: Any) -> StackView:
        stack = stacks.create_stack(self.rt, TENANT, self.name, text, **kwargs)
        self.id = stack.id
        return stack

    def update(self, text: str, **kwargs: Any) -> StackView:
        return stacks.update_stack(self.rt, TENANT, self.name, text, **kwargs)

    def delete(self) -> StackView:
        return stacks.delete_stack(self.rt, TENANT, self.name)

    def finish(self) -> StackView:
        return self.wait(self.stack().id)

    def stack(self) -> StackView:
        return queries.get_stack(self.rt, TENANT, self.id or self.name)

    def events(self) -> list[EventView]:
        return queries.list_events(self.rt, TENANT, self.stack().id)

    def records(self) -> dict[str, list[RecordView]]:
        out: dict[str, list[RecordView]] = {}
        for r in queries.list_resources(self.rt, TENANT, self.stack().id):
            out.setdefault(r.name, []).append(r)
        return out

    def current(self) -> dict[str, RecordView]:
        return {name: max(rs, key=lambda r: r.id) for name, rs in self.records().items()}

    def entities(self) -> dict[str, str]:
        """Live test entities of this stack: entity id -> value."""
        stack_id = self.stack().id
        return {eid: value for eid, (owner, value) in entity_backend(self.rt).live().items()
                if owner.startswith(stack_id + "/")}

    def entity_owners(self) -> list[str]:
        stack_id = self.stack().id
        return [owner for owner, _ in entity_backend(self.rt).live().values()
                if owner.startswith(stack_id + "/")]

    def created_total(self) -> int:
        return entity_backend(self.rt).created_count_prefix(self.stack().id + "/")


Runner = Callable[[], None]
