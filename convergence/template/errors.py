"""Errors in user input: templates, environments, files and parameter values.

Every problem carries the path of the place it concerns (``resources.web.properties.flavor``),
a plain sentence, and a kind (used by callers that group problems, such as the corpus report).
Checks append problems to a :class:`Problems` collector so that one validation reports all of
them at once; :class:`TemplateError` is what leaves the package when anything was found.

Callers: every module of ``convergence.template`` reports through these; the CLI, the API
(which turns a TemplateError into Heat's error body), the services and the engine catch
:class:`TemplateError` and read its problems.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

PathItem = str | int
Path = tuple[PathItem, ...]


def format_path(path: Sequence[PathItem]) -> str:
    """Render a path the way users read it: ``resources.web.properties.networks[0].port``."""
    out: list[str] = []
    for item in path:
        if isinstance(item, int):
            out.append(f"[{item}]")
        elif out:
            out.append(f".{item}")
        else:
            out.append(str(item))
    return "".join(out)


# The kinds of problem. Kept few and stable: callers group on them.
SYNTAX = "syntax"  # malformed YAML/JSON, size, depth, alias bombs
STRUCTURE = "structure"  # unknown sections or keys, wrong shapes of sections
VERSION = "version"  # unknown heat_template_version, function not in this version
FUNCTION = "function"  # unknown function, wrong argument shape
REFERENCE = "reference"  # undefined parameter, resource, output, condition, attribute
TYPE = "resource-type"  # resource type nobody provides
PROPERTY = "property"  # property schema violations
PARAMETER = "parameter"  # parameter definition or value problems
FILE = "file"  # get_file or template file not in the files map
CYCLE = "cycle"  # circular dependencies
ENVIRONMENT = "environment"  # environment file problems
EVALUATION = "evaluation"  # a function failed while resolving values


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input, and where."""

    path: str
    message: str
    kind: str = STRUCTURE

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class TemplateError(ValueError):
    """User input was refused. Holds every problem found, in the order found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        if not problems:
            raise ValueError("TemplateError needs at least one problem")
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def at(cls, path: Sequence[PathItem] | str, message: str, kind: str) -> TemplateError:
        where = path if isinstance(path, str) else format_path(path)
        return cls([Problem(where, message, kind)])

    @property
    def path(self) -> str:
        return self.problems[0].path

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(p.kind for p in self.problems)


class Problems:
    """Collects problems during a validation; raises them together at the end."""

    __slots__ = ("_items", "_seen")

    def __init__(self) -> None:
        self._items: list[Problem] = []
        self._seen: set[Problem] = set()

    def add(self, path: Sequence[PathItem] | str, message: str, kind: str) -> None:
        where = path if isinstance(path, str) else format_path(path)
        problem = Problem(where, message, kind)
        if problem not in self._seen:
            self._seen.add(problem)
            self._items.append(problem)

    def extend(self, problems: Iterable[Problem]) -> None:
        for p in problems:
            self.add(p.path, p.message, p.kind)

    def absorb(self, error: TemplateError, prefix: str = "") -> None:
        """Take the problems of an error raised by a sub-check, optionally under a prefix."""
        for p in error.problems:
            path = f"{prefix}.{p.path}" if prefix and p.path else (prefix or p.path)
            self.add(path, p.message, p.kind)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self._items)

    def raise_if_any(self) -> None:
        if self._items:
            raise TemplateError(self._items)
