"""Graphs of work: what must happen before what. Pure (networkx only).

Planning builds one graph per traversal from a stack's dependencies; workers never hold a
graph, they read the node rows the plan was stored as.
"""

from convergence.graph.dependency import dependency_graph, graph_order

__all__ = ["dependency_graph", "graph_order"]
