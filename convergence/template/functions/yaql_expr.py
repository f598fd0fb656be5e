"""The ``yaql`` intrinsic function: evaluate a yaql expression over template data.

Defines :data:`YAQL`, which ``versions`` places in the function table of newton and later and,
from pike, in the condition function table. The validator calls its ``check`` once, which
parses a literal expression so that syntax errors are reported with the call's path; the
resolver calls ``evaluate``.

As in Heat, one yaql engine serves the whole process. It is built lazily on first use with
Heat's default limits (``[yaql] limit_iterators = 200``, ``memory_quota = 10000`` bytes), and
parsed expressions are cached since the same expression is evaluated for every stack update.
"""

from __future__ import annotations

# yaql refers to collections.abc without importing it; import it first so yaql loads even
# when nothing else has imported it yet.
import collections.abc  # noqa: F401
import functools
import threading
from typing import Any

import yaql
from yaql.language import exceptions as yaql_exceptions

from convergence.template.errors import FUNCTION
from convergence.template.functions.base import (
    Call,
    CheckContext,
    FunctionDef,
    Resolver,
    fail,
    shape_error,
)

# Heat's defaults for the [yaql] options: bounds on collection size and memory per expression.
LIMIT_ITERATORS = 200
MEMORY_QUOTA = 10000

_SHAPE = 'a map with "expression" and optional "data"'
_KEYS = frozenset({"expression", "data"})

_lock = threading.Lock()
_engine: Any = None
_root_context: Any = None


def _yaql_engine() -> tuple[Any, Any]:
    """The process-wide yaql parser and root context, built on first use."""
    global _engine, _root_context
    with _lock:
        if _engine is None:
            options = {
                "yaql.limitIterators": LIMIT_ITERATORS,
                "yaql.memoryQuota": MEMORY_QUOTA,
            }
            _engine = yaql.YaqlFactory().create(options)
            _root_context = yaql.create_context()
        return _engine, _root_context


class _BadExpression(Exception):
    """A yaql syntax error, with yaql's own description."""


@functools.lru_cache(maxsize=1024)
def _parse(expression: str) -> Any:
    engine, _ = _yaql_engine()
    try:
        # The PLY parser keeps state on itself, so parses must not overlap across threads.
        with _lock:
            return engine(expression)
    except yaql_exceptions.YaqlException as exc:
        raise _BadExpression(str(exc)) from exc


def _plain(value: Any) -> Any:
    """Turn yaql's set results into lists: everything downstream expects JSON-like data."""
    if isinstance(value, (set, frozenset)):
        items = [_plain(v) for v in value]
        try:
            return sorted(items)
        except TypeError:  # mixed types: keep yaql's order rather than fail
            return items
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _check(call: Call, ctx: CheckContext) -> None:
    args = call.args
    if not isinstance(args, dict) or "expression" not in args or set(args) - _KEYS:
        shape_error(ctx, call, _SHAPE)
        return
    expression = args["expression"]
    if isinstance(expression, Call):
        return
    if not isinstance(expression, str):
        ctx.error(call.path, f'{call.name}: the "expression" argument must be a string',
                  FUNCTION)
        return
    try:
        _parse(expression)
    except _BadExpression as exc:
        ctx.error(call.path, f"{call.name}: bad expression: {exc}", FUNCTION)


def _evaluate(call: Call, res: Resolver) -> Any:
    args = call.args
    if not isinstance(args, dict) or "expression" not in args or set(args) - _KEYS:
        raise fail(call, f"arguments must be {_SHAPE}")
    expression = res.resolve(args["expression"])
    if not isinstance(expression, str):
        raise fail(call, 'the "expression" argument must be a string')
    try:
        statement = _parse(expression)
    except _BadExpression as exc:
        raise fail(call, f"bad expression: {exc}") from None
    data = res.resolve(args.get("data", {}))
    _, root = _yaql_engine()
    try:
        result = statement.evaluate({"data": data}, root.create_child_context())
    except yaql_exceptions.YaqlException as exc:
        raise fail(call, f"evaluation failed: {exc}") from None
    # The standard library raises plain Python errors for bad data (a missing key, int('x'),
    # division by zero); they are the template's fault, not the engine's.
    except Exception as exc:
        raise fail(call, f"evaluation failed: {type(exc).__name__}: {exc}") from None
    return _plain(result)


YAQL = FunctionDef(
    "yaql", _evaluate, _check, doc="Evaluate a yaql expression over 'data' (newton+)."
)
