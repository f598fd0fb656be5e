"""Graphs of work: what must happen before what. Pure (networkx only).

Planning (``plan``, called by the engine once per traversal) builds the nodes and edges of a
traversal from a stack's dependencies; workers never hold a graph, they read the node rows the
plan was stored as. ``dependency`` gives a stack's resources as a networkx graph, for tools and
tests that want one; no path of the engine or the API builds it (a networkx node costs far
more than a name in a map, which is all a million-resource stack needs). Imports nothing of
Convergence outside this package; an import-linter contract keeps it free of database, queue,
cloud and web libraries.
"""

from convergence.graph.dependency import dependency_graph, graph_order

__all__ = ["dependency_graph", "graph_order"]
