"""No import cycle between the modules of ``convergence``, nor between those of the simulated
cloud (``convergence_simcloud``, a distribution of its own): the contract, as a test.

The import graph is built with ``grimp`` (the library import-linter runs on) and its strongly
connected components are found with networkx; any component of more than one module is a
cycle, and the failure names its modules, one cycle through them, and every import line that
holds the component together, so that the fix is read off the message.

Every import counts: module-level, function-local (a lazy import is still a dependency; it
only hides the cycle from the interpreter) and ``if TYPE_CHECKING:`` imports. A
TYPE_CHECKING-only back edge is not a runtime cycle, but it still couples the two modules
(neither can be read, typed or moved without the other), and the fix is cheap: a protocol in
the lower module for what it needs, or the shared type moved down. No exception is made today.

Run by ``make test`` with the rest of ``tests/unit``.
"""

from __future__ import annotations

import grimp
import networkx as nx
import pytest

PACKAGE = "convergence"


def import_cycles(graph: grimp.ImportGraph, package: str = PACKAGE) -> list[str]:
    """One description per import cycle among ``package``'s modules; empty when there is none."""
    digraph: nx.DiGraph[str] = nx.DiGraph()
    for module in graph.modules:
        if not _inside(module, package):
            continue
        digraph.add_node(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if _inside(imported, package) and imported != module:
                digraph.add_edge(module, imported)
    reports = []
    for component in nx.strongly_connected_components(digraph):
        if len(component) < 2:
            continue
        members = sorted(component)
        one_cycle = [a for a, _ in nx.find_cycle(digraph.subgraph(members), source=members[0])]
        lines = [f"  cycle: {' -> '.join([*one_cycle, one_cycle[0]])}", "  imports:"]
        for importer in members:
            details = [d for imported in set(digraph.successors(importer)) & component
                       for d in graph.get_import_details(importer=importer, imported=imported)]
            lines.extend(f"    {importer}:{d['line_number']}: {d['line_contents']}"
                         for d in sorted(details, key=lambda d: d["line_number"]))
        reports.append(f"{len(members)} modules: {', '.join(members)}\n" + "\n".join(lines))
    return sorted(reports)


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.mark.parametrize("package", [PACKAGE, "convergence_simcloud"])
def test_no_import_cycle_between_modules(package: str) -> None:
    cycles = import_cycles(grimp.build_graph(package, cache_dir=None), package)
    if cycles:
        pytest.fail(f"{len(cycles)} import cycle(s) in {package}:\n\n" + "\n\n".join(cycles),
                    pytrace=False)


def test_a_cycle_is_reported_with_its_modules_and_lines() -> None:
    graph = grimp.ImportGraph()
    for importer, imported, line in [("p.a", "p.b", 3), ("p.b", "p.c", 4), ("p.c", "p.a", 5),
                                     ("p.c", "p.d", 6), ("p.d", "q", 1)]:
        graph.add_import(importer=importer, imported=imported, line_number=line,
                         line_contents=f"import {imported}")
    [report] = import_cycles(graph, "p")
    assert report.startswith("3 modules: p.a, p.b, p.c\n")
    assert "cycle: p.a -> p.b -> p.c -> p.a" in report
    assert "p.c:5: import p.a" in report
    assert "p.d" not in report
    assert import_cycles(graph, "q") == []
