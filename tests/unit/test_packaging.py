"""What a non-editable wheel needs, checked on the checkout in a fraction of a second.

The repository builds two distributions: ``convergence`` (``pyproject.toml``) and the simulated
cloud, ``convergence-simcloud`` (``simcloud/pyproject.toml``), which a production install
leaves out and the main one's ``simcloud`` extra adds. A wheel carries the packages setuptools
discovers and the package data its ``pyproject.toml`` declares; an installed copy then runs
without the repository. So, for each: every folder of Python code is a package
(``__init__.py``), every other file the code reads is declared package data (the Alembic
scripts and ``alembic.ini``, the template JSON Schemas, ``py.typed``), and every library the
code imports is installed by the runtime dependencies, not only by the ``dev`` extra. And they
stay apart: the main distribution's discovery leaves the simulated cloud's package out (its
``convergence*`` would match it), the simulated cloud depends on nothing of Convergence, and
the extra names the simulated cloud's own version.

``tests/packaging_check.sh`` builds both wheels, installs the main one into a fresh virtualenv
(without the simulated cloud, then with it) and runs it: too slow for every run, it is the
proof this test stands in for.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Project:
    """One distribution built from this repository: where its ``pyproject.toml`` is and the
    top-level packages (folders beside it) its wheel carries."""

    root: Path
    packages: tuple[str, ...]

    @property
    def pyproject(self) -> dict[str, Any]:
        return tomllib.loads((self.root / "pyproject.toml").read_text(encoding="utf-8"))

    @property
    def name(self) -> str:
        return str(self.pyproject["project"]["name"])

    def source_files(self) -> list[Path]:
        return [p for pkg in self.packages for p in (self.root / pkg).rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]

    def discovered(self, package: str) -> bool:
        """Whether ``packages.find`` takes ``package`` (setuptools matches with fnmatch)."""
        find = self.pyproject["tool"]["setuptools"]["packages"]["find"]
        return (any(fnmatch.fnmatchcase(package, p) for p in find["include"])
                and not any(fnmatch.fnmatchcase(package, p) for p in find.get("exclude", [])))


MAIN = Project(ROOT, ("convergence", "workers"))
SIMCLOUD = Project(ROOT / "simcloud", ("convergence_simcloud",))
PROJECTS = pytest.mark.parametrize("project", [MAIN, SIMCLOUD], ids=lambda p: p.name)
PYPROJECT = MAIN.pyproject


def _packages_of(project: Project) -> set[str]:
    """Every package (dotted) under the project's top-level packages."""
    return {".".join(init.parent.relative_to(project.root).parts)
            for top in project.packages for init in (project.root / top).rglob("__init__.py")}


@PROJECTS
def test_every_folder_of_python_code_is_a_package(project: Project) -> None:
    folders = {p.parent for p in project.source_files() if p.suffix == ".py"}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file())
    assert not missing, f"folders of code without __init__.py (left out of a wheel): {missing}"


@PROJECTS
def test_package_discovery_takes_the_packages(project: Project) -> None:
    left_out = sorted(p for p in _packages_of(project) if not project.discovered(p))
    assert not left_out, f"{project.name}: packages.find leaves out {left_out}"


def test_the_main_distribution_leaves_the_simulated_cloud_out() -> None:
    """``convergence*`` matches ``convergence_simcloud``: were its folder beside the engine's,
    the main wheel would carry it all the same; the exclusion keeps it out."""
    taken = sorted(p for p in _packages_of(SIMCLOUD) if MAIN.discovered(p))
    assert not taken, f"the main distribution would carry the simulated cloud: {taken}"
    assert not (ROOT / "convergence" / "simcloud").exists()
    assert not (ROOT / "convergence_simcloud").exists()


def test_the_simulated_cloud_is_an_extra_of_its_own_version() -> None:
    version = SIMCLOUD.pyproject["project"]["version"]
    assert version == PYPROJECT["project"]["version"]
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert extras["simcloud"] == [f"convergence-simcloud=={version}"]
    assert f"convergence-simcloud=={version}" in extras["dev"]  # the tests run on it
    assert "convergence-simcloud" not in {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    # ... and it depends on nothing of Convergence (its clock protocol is its own).
    assert not {_name(r) for r in SIMCLOUD.pyproject["project"]["dependencies"]} & {
        "convergence"}


@PROJECTS
def test_every_data_file_is_declared_package_data(project: Project) -> None:
    declared: set[Path] = set()
    for package, patterns in project.pyproject["tool"]["setuptools"]["package-data"].items():
        folder = project.root.joinpath(*package.split("."))
        assert (folder / "__init__.py").is_file(), f"package data for a non-package: {package}"
        for pattern in patterns:
            matched = set(folder.glob(pattern))
            assert matched, f"package-data {package}: {pattern!r} matches nothing"
            declared |= matched
    data = {p for p in project.source_files() if p.suffix != ".py"}
    undeclared = sorted(str(p.relative_to(ROOT)) for p in data - declared)
    assert not undeclared, f"files a wheel would leave out (add them to package-data): {undeclared}"


def test_the_migrations_and_schemas_are_shipped() -> None:
    store = ROOT / "convergence" / "store"
    shipped = {p.relative_to(ROOT).as_posix() for p in MAIN.source_files()}
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


# The extras whose libraries the code may import: where it does, it says how to install them
# when they are missing (the simulated cloud: import-linter names the importers).
RUNTIME_EXTRAS = {"simcloud"}


@PROJECTS
def test_every_imported_library_is_a_runtime_dependency(project: Project) -> None:
    """A third-party import is installed by a declared dependency (or one it requires)."""
    meta = project.pyproject["project"]
    requirements = list(meta["dependencies"])
    for extra in RUNTIME_EXTRAS:
        requirements += meta.get("optional-dependencies", {}).get(extra, [])
    declared = {_name(r): _extras(r) for r in requirements}
    installed = set(declared)
    for dist, extras in declared.items():
        installed |= _runtime_requirements(dist, extras)
    providers = importlib.metadata.packages_distributions()
    graph = grimp.build_graph(*project.packages, include_external_packages=True,
                              cache_dir=None)
    missing = {}
    for module in graph.modules:
        top = module.split(".")[0]
        if top in project.packages or top in sys.stdlib_module_names:
            continue
        dists = {_name(d) for d in providers.get(top, [top])}
        if not dists & installed:
            importers = sorted(graph.find_modules_that_directly_import(module))
            missing[module] = f"{sorted(dists)} imported by {importers}"
    assert not missing, f"imported but not a runtime dependency in pyproject.toml: {missing}"
