"""Tiny stand-ins for the resolver and the check context, for testing function modules alone.

``Res`` resolves nested calls by evaluating them and drops ``ELIDED`` from lists and maps, as
the real resolver does; ``Ctx`` collects static-check errors. ``call`` builds a call at path
``x`` and ``dyn`` a nested call whose value is known only at resolution (like ``get_param``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from convergence.template.errors import Path, TemplateError, format_path
from convergence.template.functions.base import ELIDED, Call, FunctionDef


@dataclass(frozen=True)
class Version:
    name: str = "2021-04-16"


class Res:
    """A minimal Resolver: only ``resolve`` and ``version`` are used by these functions."""

    def __init__(self, version: str = "2021-04-16") -> None:
        self.version = Version(version)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, Call):
            return value.fn.evaluate(value, self)  # type: ignore[arg-type]
        if isinstance(value, dict):
            out = {k: self.resolve(v) for k, v in value.items()}
            return {k: v for k, v in out.items() if v is not ELIDED}
        if isinstance(value, list):
            return [r for r in (self.resolve(v) for v in value) if r is not ELIDED]
        return value


@dataclass
class Ctx:
    """A minimal CheckContext collecting ``(path, message, kind)``."""

    version: Version = field(default_factory=Version)
    errors: list[tuple[str, str, str]] = field(default_factory=list)

    def error(self, path: Path, message: str, kind: str = "function") -> None:
        self.errors.append((format_path(path), message, kind))

    @property
    def messages(self) -> list[str]:
        return [m for _, m, _ in self.errors]


def call(fn: FunctionDef, args: Any) -> Call:
    return Call(fn, args, ("x",))


# A nested call standing for any function whose value is unknown until resolution.
DYN = FunctionDef("dyn", lambda c, r: c.args)


def dyn(value: Any) -> Call:
    return Call(DYN, value, ("x", "dyn"))


def evaluate(fn: FunctionDef, args: Any) -> Any:
    return fn.evaluate(call(fn, args), Res())  # type: ignore[arg-type]


def check(fn: FunctionDef, args: Any) -> list[str]:
    ctx = Ctx()
    fn.check(call(fn, args), ctx)  # type: ignore[arg-type]
    return ctx.messages


def eval_error(fn: FunctionDef, args: Any) -> str:
    """The message of the evaluation error (asserting there is exactly one)."""
    with pytest.raises(TemplateError) as info:
        evaluate(fn, args)
    (problem,) = info.value.problems
    assert problem.path == "x"
    assert problem.kind == "evaluation"
    return problem.message
