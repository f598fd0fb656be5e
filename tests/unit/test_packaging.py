"""What a non-editable wheel needs, checked on the checkout in a fraction of a second.

A wheel carries the packages setuptools discovers and the package data ``pyproject.toml``
declares; an installed copy then runs without the repository. So: every folder of Python code
is a package (``__init__.py``), every other file the code reads is declared package data (the
Alembic scripts and ``alembic.ini``, the template JSON Schemas), and every library the code
imports is installed by the runtime dependencies, not only by the ``dev`` extra.

``tests/packaging_check.sh`` builds a wheel, installs it into a fresh virtualenv and migrates a
database with it: too slow for every run, it is the proof this test stands in for.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("convergence", "workers")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _source_files(package: str) -> list[Path]:
    return [p for p in (ROOT / package).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]


def test_every_folder_of_python_code_is_a_package() -> None:
    folders = {p.parent for pkg in PACKAGES for p in _source_files(pkg) if p.suffix == ".py"}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file())
    assert not missing, f"folders of code without __init__.py (left out of a wheel): {missing}"


def test_package_discovery_takes_the_packages() -> None:
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    assert all(any(re.fullmatch(pattern.replace("*", ".*"), pkg) for pattern in include)
               for pkg in PACKAGES)


def test_every_data_file_is_declared_package_data() -> None:
    declared: set[Path] = set()
    for package, patterns in PYPROJECT["tool"]["setuptools"]["package-data"].items():
        folder = ROOT.joinpath(*package.split("."))
        assert (folder / "__init__.py").is_file(), f"package data for a non-package: {package}"
        for pattern in patterns:
            matched = set(folder.glob(pattern))
            assert matched, f"package-data {package}: {pattern!r} matches nothing"
            declared |= matched
    data = {p for pkg in PACKAGES for p in _source_files(pkg) if p.suffix != ".py"}
    undeclared = sorted(str(p.relative_to(ROOT)) for p in data - declared)
    assert not undeclared, f"files a wheel would leave out (add them to package-data): {undeclared}"


def test_the_migrations_and_schemas_are_shipped() -> None:
    store = ROOT / "convergence" / "store"
    shipped = {p.relative_to(ROOT).as_posix() for p in _source_files("convergence")}
    for needed in ("convergence/store/alembic.ini",
                   "convergence/store/migrations/env.py",
                   "convergence/store/migrations/script.py.mako",
                   "convergence/template/schemas/hot-template.schema.json",
                   "convergence/template/schemas/environment.schema.json"):
        assert needed in shipped
    assert len(list((store / "migrations" / "versions").glob("[0-9]*.py"))) >= 1


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def _extras(requirement: str) -> set[str]:
    match = re.match(r"[A-Za-z0-9._-]+\s*\[([^]]*)\]", requirement.strip())
    return {e.strip() for e in match.group(1).split(",")} if match else set()


def _runtime_requirements(dist: str, extras: set[str]) -> set[str]:
    """What installing ``dist[extras]`` installs directly (environment markers aside)."""
    try:
        requirements = importlib.metadata.requires(dist) or []
    except importlib.metadata.PackageNotFoundError:
        raise AssertionError(f"declared dependency {dist} is not installed") from None
    names = set()
    for requirement in requirements:
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", requirement)
        if extra is None or extra.group(1) in extras:
            names.add(_name(requirement))
    return names


def test_every_imported_library_is_a_runtime_dependency() -> None:
    """A third-party import is installed by a declared dependency (or one it requires)."""
    declared = {_name(r): _extras(r) for r in PYPROJECT["project"]["dependencies"]}
    installed = set(declared)
    for dist, extras in declared.items():
        installed |= _runtime_requirements(dist, extras)
    providers = importlib.metadata.packages_distributions()
    graph = grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)
    missing = {}
    for module in graph.modules:
        top = module.split(".")[0]
        if top in PACKAGES or top in sys.stdlib_module_names:
            continue
        dists = {_name(d) for d in providers.get(top, [top])}
        if not dists & installed:
            importers = sorted(graph.find_modules_that_directly_import(module))
            missing[module] = f"{sorted(dists)} imported by {importers}"
    assert not missing, f"imported but not a runtime dependency in pyproject.toml: {missing}"
