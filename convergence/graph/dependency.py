"""The dependency graph of a stack's resources as a networkx DiGraph.

An edge ``a -> b`` means ``b`` requires ``a``: creation follows edges, deletion goes against
them. Built from a ``StackDefinition``'s ``dependencies`` in one pass. Callers: tools that want
the graph as networkx gives it (none in this repository since ``benchmarks/template_validate.py``
measures the accept path instead); the engine plans with ``plan`` and validation finds cycles
with ``convergence.template.dependencies``, neither of which builds a networkx graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import networkx as nx


def dependency_graph(requires: Mapping[str, Iterable[str]]) -> nx.DiGraph:
    """A DiGraph with a node per resource and an edge from each requirement to its user."""
    graph = nx.DiGraph()
    graph.add_nodes_from(requires)
    graph.add_edges_from((req, name) for name, reqs in requires.items() for req in reqs)
    return graph


def graph_order(graph: nx.DiGraph) -> list[str]:
    """Nodes in creation order (each after what it requires), ties broken by name."""
    return list(nx.lexicographical_topological_sort(graph))
