"""The import contracts cover the whole code: each third-party room's contract names every
top-level module of ``convergence``, and the simulated cloud's package
(``convergence_simcloud``, a distribution of its own), but the room itself.

The contracts in ``pyproject.toml`` list their source modules one by one (import-linter has no
"everything but" form), so a module added at the top level would escape them unnoticed; this
test fails naming the contract and the module to add. Companion of ``test_import_graph.py``.
"""

from __future__ import annotations

import pathlib
import re
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "convergence"
SIMCLOUD = "convergence_simcloud"  # simcloud/convergence_simcloud: a package, one module here

# Where each library may be imported: the rest of the code must not import it.
ROOMS = {
    "sqlalchemy": {"convergence.store"},
    "celery": {"convergence.dispatch", "convergence.workers"},
    "fastapi": {"convergence.api", SIMCLOUD},
    "click": {"convergence.cli"},
    "openstack": {"convergence.plugins"},
}


def top_level_modules() -> set[str]:
    """Every top-level module of ``convergence`` (dotted), and the simulated cloud's package."""
    names = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert (ROOT / "simcloud" / SIMCLOUD / "__init__.py").is_file()
    return {f"convergence.{name}" for name in names} | {SIMCLOUD}


def contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    found: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return found


@pytest.mark.parametrize("library", sorted(ROOMS))
def test_a_room_contract_names_every_module_outside_the_room(library: str) -> None:
    # The rooms' contracts are the ones named "... stay(s) in ..." (the pure core's own
    # contract forbids these libraries too, for its two packages only).
    matching = [c for c in contracts() if re.search(r"\bstays? in\b", str(c["name"]))
                and library in c.get("forbidden_modules", [])]  # type: ignore[operator]
    assert matching, f"no import-linter contract keeps {library!r} in its room"
    expected = top_level_modules() - ROOMS[library]
    for contract in matching:
        listed = set(contract["source_modules"])  # type: ignore[call-overload]
        assert listed == expected, (
            f"contract {contract['name']!r}: add {sorted(expected - listed)}, "
            f"remove {sorted(listed - expected)}")


def test_the_package_has_the_rooms_the_contracts_name() -> None:
    rooms = set().union(*ROOMS.values())
    assert rooms <= top_level_modules()
