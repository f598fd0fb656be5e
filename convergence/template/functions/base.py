"""What an intrinsic function is: a definition in a version's table, and a parsed call.

A template's data is parsed once into plain values with :class:`Call` objects where intrinsic
functions stand. A call is checked statically (argument shapes, references) through a
:class:`CheckContext` and evaluated through a :class:`Resolver`; both are small protocols so
that the function code knows nothing of where parameters, files or resource data come from.

Function modules (``references``, ``strings``, ``replace``, ``collections``, ``repeat``,
``conditions``, ``yaql_expr``) define :class:`FunctionDef` values; ``versions`` arranges them
into one table per template version. ``parse`` implements :class:`CheckContext` and
``resolve`` implements :class:`Resolver`.

This module sits below ``versions`` (which imports every function module), so it names the
template version only through the :class:`VersionInfo` protocol, never ``TemplateVersion``
itself: a function needs no more of a version than its name, and the import graph stays
acyclic (``tests/unit/test_import_graph.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from convergence.template.errors import EVALUATION, FUNCTION, Path, TemplateError


class Call:
    """One intrinsic function call in a template: ``{name: args}`` at ``path``."""

    __slots__ = ("args", "fn", "path")

    def __init__(self, fn: FunctionDef, args: Any, path: Path) -> None:
        self.fn = fn
        self.args = args
        self.path = path

    @property
    def name(self) -> str:
        return self.fn.name

    def __repr__(self) -> str:
        return f"Call({self.fn.name!r}, {self.args!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Call) and other.fn.name == self.fn.name and other.args == self.args

    def __hash__(self) -> int:
        return hash(self.fn.name)


class _Elided:
    """Marks a value removed by a two-argument ``if`` whose condition is false (wallaby+)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ELIDED"


ELIDED: Any = _Elided()


class VersionInfo(Protocol):
    """What a function may ask of the template version it is in (``TemplateVersion`` is one)."""

    @property
    def name(self) -> str: ...


class CheckContext(Protocol):
    """What a function's static check may ask about the template it is in."""

    @property
    def version(self) -> VersionInfo: ...

    def error(self, path: Path, message: str, kind: str = FUNCTION) -> None: ...

    def has_parameter(self, name: str) -> bool: ...

    def has_resource(self, name: str) -> bool: ...

    def has_condition(self, name: str) -> bool: ...

    def check_file(self, key: str, path: Path) -> None: ...

    def check_attribute(self, resource: str, attribute: Any, path: Path,
                        rest: Sequence[Any] = ()) -> None: ...

    def check_condition(self, value: Any, path: Path) -> None: ...

    @property
    def section(self) -> str:
        """``resources``, ``outputs``, ``conditions`` or ``parameters`` (where the call is)."""
        ...

    @property
    def owner(self) -> str | None:
        """The resource or output the call belongs to, if any."""
        ...


class Resolver(Protocol):
    """What a function's evaluation may ask for. Implemented in ``resolve``."""

    @property
    def version(self) -> VersionInfo: ...

    def resolve(self, value: Any) -> Any:
        """Resolve a parsed value (calls inside it included) to plain data."""
        ...

    def parameter(self, name: str, path: Path) -> Any: ...

    def reference(self, resource: str, path: Path) -> Any: ...

    def attribute(self, resource: str, name: str, path: Path) -> Any: ...

    def all_attributes(self, resource: str, path: Path) -> dict[str, Any]: ...

    def file(self, key: str, path: Path) -> str: ...

    def condition(self, value: Any, path: Path) -> bool: ...

    def facade(self, key: str, path: Path) -> Any: ...

    def availability_zones(self) -> list[str]: ...


CheckFn = Callable[[Call, CheckContext], None]
EvalFn = Callable[[Call, Resolver], Any]


def _no_check(call: Call, ctx: CheckContext) -> None:
    return None


@dataclass(frozen=True, slots=True)
class FunctionDef:
    """An intrinsic function as one template version defines it."""

    name: str
    evaluate: EvalFn
    check: CheckFn = _no_check
    # For get_resource / get_attr and their CFN twins: the resource a call depends on.
    target: Callable[[Call], str | None] | None = None
    # Data-only arguments: not parsed for nested functions (none in HOT today, kept explicit).
    raw_args: bool = False
    doc: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


def removed(name: str, replacement: str) -> FunctionDef:
    """A function a version no longer has: any use is an error naming the version."""

    def check(call: Call, ctx: CheckContext) -> None:
        ctx.error(
            call.path,
            f"function '{name}' is not available in heat_template_version "
            f"{ctx.version.name}{'; use ' + replacement if replacement else ''}",
            "version",
        )

    def evaluate(call: Call, res: Resolver) -> Any:
        raise TemplateError.at(call.path, f"function '{name}' is not available", "version")

    return FunctionDef(name, evaluate, check)


def fail(call: Call, message: str) -> TemplateError:
    """An evaluation error at a call, naming the function."""
    return TemplateError.at(call.path, f"{call.name}: {message}", EVALUATION)


def shape_error(ctx: CheckContext, call: Call, expected: str) -> None:
    """Report an argument-shape error in the one wording every function uses."""
    ctx.error(call.path, f"{call.name}: arguments must be {expected}", FUNCTION)


def report(ctx: CheckContext, call: Call, message: str) -> None:
    """Report a problem with a call's arguments, naming the function."""
    ctx.error(call.path, f"{call.name}: {message}", FUNCTION)


def is_seq(value: Any) -> bool:
    """A list in resolved data (Heat's ``Sequence`` that is not a string)."""
    return isinstance(value, (list, tuple))


def has_calls(value: Any) -> bool:
    """Whether a parsed value still contains calls (so its type is known only at resolve time)."""
    if isinstance(value, Call):
        return True
    if isinstance(value, dict):
        return any(has_calls(v) or isinstance(k, Call) for k, v in value.items())
    if isinstance(value, list):
        return any(has_calls(v) for v in value)
    return False
