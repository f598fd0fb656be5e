"""Which resources depend on which, and the cycles that make a template impossible.

Used by ``parse`` (conditions that refer to each other in a circle, :func:`condition_cycle`)
and ``validate`` (a cycle is an error that names it: ``a -> b -> c -> a``); ``validate`` stores
what :func:`resource_dependencies` finds in the ``StackDefinition``, which is what the engine's
planner reads. Everything here is linear in the size of the graph and iterative, so a chain of
a million resources neither recurses nor slows down; a graph without cycles (the common case)
is told so by one depth-first pass, before anything is spent on naming cycles.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from convergence.template.functions.base import Call
from convergence.template.model import Template, inline_condition_key


@dataclass(frozen=True, slots=True)
class Peer:
    """What an implicit-dependency rule sees of a resource: its type and its properties as
    written (calls unevaluated)."""

    type: str
    properties: Mapping[str, Any]


class Peers(Mapping[str, Peer]):
    """The resources of a stack by name, and by type (:meth:`of_type`): a rule looks at the
    few resources of the types it cares for, never at all of them, so a stack's implicit
    dependencies cost time linear in its size."""

    def __init__(self, peers: Mapping[str, Peer]) -> None:
        self._peers = peers
        self._by_type: dict[str, list[tuple[str, Peer]]] = {}
        for name, peer in peers.items():
            self._by_type.setdefault(peer.type, []).append((name, peer))
        self.memo: dict[Any, Any] = {}  # what rules worked out, shared among them

    def of_type(self, *types: str) -> Iterable[tuple[str, Peer]]:
        for type_name in types:
            yield from self._by_type.get(type_name, ())

    def __getitem__(self, name: str) -> Peer:
        return self._peers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._peers)

    def __len__(self) -> int:
        return len(self._peers)


# A resource type's implicit dependencies (``TypeSchema.implicit``), as Heat's
# ``add_dependencies``: given a resource's name and every resource of the stack, the names of
# those it must come after although it does not refer to them (a port after the subnets of its
# network, a floating IP after the router interface that reaches its port).
ImplicitRule = Callable[[str, Peers], Iterable[str]]


def reference(value: Any) -> str | None:
    """What a property value names, comparable between two resources: ``get_resource: X``
    is ``"resource X"``, a literal name or id itself; anything else (another call) None."""
    if isinstance(value, str):
        return value
    target = referenced_resource(value)
    return None if target is None else f"resource {target}"


def referenced_resource(value: Any) -> str | None:
    """The resource ``get_resource: X`` names (None for anything else)."""
    if isinstance(value, Call) and value.name == "get_resource" and isinstance(value.args, str):
        return value.args
    return None


def with_implicit(graph: Mapping[str, frozenset[str]], rules: Mapping[str, ImplicitRule],
                  peers: Peers) -> dict[str, frozenset[str]]:
    """``graph`` with the implicit dependencies of the resources ``rules`` has a rule for.
    An implicit dependency that would close a cycle is left out (Heat's would make the
    template impossible; a user never wrote it)."""
    added: dict[str, set[str]] = {}
    for name, rule in rules.items():
        if name not in graph:
            continue
        extra = {d for d in rule(name, peers) if d in graph and d != name} - graph[name]
        if extra:
            added[name] = extra
    if not added:
        return dict(graph)
    out = {name: deps | frozenset(added.get(name, ())) for name, deps in graph.items()}
    for cycle in find_cycles(out):
        for name in cycle:
            out[name] = graph[name]  # the cycle's members keep what the user wrote only
    return out


def resource_dependencies(
    template: Template, enabled: Mapping[str, bool | None] | None = None
) -> dict[str, frozenset[str]]:
    """For each existing resource, the existing resources it requires.

    ``enabled`` maps condition names (and inline condition keys) to their values; a resource
    whose condition is false does not exist, and references in the untaken branch of an ``if``
    do not count. Unknown (None) conditions count as possibly true.
    """
    existing = {name for name, defn in template.resources.items()
                if condition_allows(defn.condition, enabled)}
    graph: dict[str, frozenset[str]] = {}
    for name in existing:
        requires = template.resources[name].requires(enabled)
        graph[name] = (requires & existing) or _NONE  # one empty set for all that have none
    return graph


_NONE: frozenset[str] = frozenset()


def condition_allows(condition: object, enabled: Mapping[str, bool | None] | None) -> bool:
    """Whether something guarded by ``condition`` may exist (unknown counts as yes)."""
    if condition is None or enabled is None:
        return True
    if isinstance(condition, bool):
        return condition
    key = condition if isinstance(condition, str) else inline_condition_key(condition)
    return enabled.get(key) is not False


def _condition_names_in(value: Any) -> list[str]:
    """Condition names an expression refers to (operands of not/and/or, or a bare name)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Call) and value.name in ("not", "and", "or"):
        operands = value.args if isinstance(value.args, list) else [value.args]
        return [n for op in operands for n in _condition_names_in(op)]
    return []


def condition_cycle(parsed: Mapping[str, Any]) -> list[str] | None:
    """A cycle of named conditions referring to each other (``parse`` refuses it)."""
    graph = {name: [n for n in _condition_names_in(body) if n in parsed]
             for name, body in parsed.items()}
    cycles = find_cycles(graph)
    return cycles[0] if cycles else None


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """One cycle per strongly connected component that has one, as ``[a, b, ..., a]``."""
    if _acyclic(graph):
        return []  # the common case, found without building a component per resource
    sccs = _strongly_connected(graph)
    cycles: list[list[str]] = []
    for component in sccs:
        first = min(component)
        if len(component) == 1 and first not in set(graph.get(first, ())):
            continue
        cycles.append(_cycle_through(graph, first, component))
    cycles.sort()
    return cycles


def _acyclic(graph: Mapping[str, Iterable[str]]) -> bool:
    """Whether no path leads from a node back to itself (depth first, iterative). Names a
    graph refers to but does not hold are left out, as :func:`_strongly_connected` does."""
    done: set[str] = set()
    on_path: set[str] = set()
    for root in graph:
        if root in done:
            continue
        on_path.add(root)
        work: list[tuple[str, Iterator[str]]] = [(root, iter(graph[root]))]
        while work:
            node, children = work[-1]
            for child in children:
                if child in done or child not in graph:
                    continue
                if child in on_path:
                    return False
                on_path.add(child)
                work.append((child, iter(graph[child])))
                break
            else:
                work.pop()
                on_path.discard(node)
                done.add(node)
    return True


def _strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[set[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(graph.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph.get(child, ()))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                result.append(component)
    return result


def _cycle_through(graph: Mapping[str, Iterable[str]], start: str,
                   component: set[str]) -> list[str]:
    """The shortest cycle from ``start`` back to itself inside its component (BFS)."""
    parents: dict[str, str] = {}
    queue: deque[str] = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph.get(node, ())):
            if child == start:
                path = [start]
                walk = node
                while walk != start:
                    path.append(walk)
                    walk = parents[walk]
                path.append(start)
                # path is start, (nodes back to start)... reversed order of the cycle
                cycle = [start, *reversed(path[1:-1]), start]
                return cycle
            if child in component and child not in parents:
                parents[child] = node
                queue.append(child)
    return [start, start]  # pragma: no cover - a component always closes


def topological_order(graph: Mapping[str, Iterable[str]]) -> list[str]:
    """Resources in an order where each comes after what it requires (Kahn, iterative)."""
    remaining = {name: 0 for name in graph}
    dependents: dict[str, list[str]] = {name: [] for name in graph}
    for name, requires in graph.items():
        for req in requires:
            if req in dependents:
                dependents[req].append(name)
                remaining[name] += 1
    ready = deque(sorted(n for n, c in remaining.items() if c == 0))
    order: list[str] = []
    while ready:
        node = ready.popleft()
        order.append(node)
        for dep in dependents[node]:
            remaining[dep] -= 1
            if remaining[dep] == 0:
                ready.append(dep)
    return order
