"""Statements run at every hop of a traversal, sent to the database through the driver's cursor.

Callers: the aggregates whose statements a batch runs (``nodes``, ``records``, ``traversals``,
``events``).
SQLAlchemy's ``Connection.execute`` of a statement built once costs about 60 us around the
driver's own work (binding the parameters, rendering an IN list's placeholders, building the
result and its rows), where the driver takes 6 us to look up a row by key on SQLite; a hop of
a chain runs ten such statements. A :class:`Lean` statement is compiled by SQLAlchemy once per
database and size of its IN lists (a power of two: a shorter list is filled up with its last
value, which an IN does not mind, so a statement has a dozen forms, not one per length up to
the store's chunk of 500); each run then puts the parameters in the order that
compilation found, converts the values SQLAlchemy would convert (the column types' own bind
and result processors: JSON text, SQLite's booleans), and makes rows of plain tuples that
have the columns' names. What SQLAlchemy does around a statement that the rest of the store
relies on is kept: the ``before_cursor_execute`` listeners are told (the statement counts of
``metrics``), and a driver's error goes through the connection's own handling (raised as a
``DBAPIError``; the connection invalidated when the database dropped it).
"""

from __future__ import annotations

import re
from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement

_Getter = Callable[[Mapping[str, Any]], Any]
_EXPANDED = re.compile(r"^(?P<key>.+)_(?P<index>\d+)$")


class _Form:
    """One statement as one database runs it for one length of each of its IN lists."""

    __slots__ = ("getters", "positional", "processors", "row", "sql")

    def __init__(self, sql: str, getters: list[tuple[str, _Getter]], positional: bool) -> None:
        self.sql = sql
        self.getters = getters
        self.positional = positional
        self.row: Any = None  # the rows' class, made at the first result
        self.processors: list[Callable[[Any], Any] | None] = []

    def arguments(self, params: Mapping[str, Any]) -> Any:
        if self.positional:
            return tuple(get(params) for _, get in self.getters)
        return {name: get(params) for name, get in self.getters}


class Lean:
    """A statement built once, run through the driver's cursor (see the module's docstring)."""

    __slots__ = ("_columns", "_expanding", "_forms", "stmt")

    def __init__(self, stmt: ClauseElement) -> None:
        self.stmt = stmt
        self._forms: dict[tuple[str, tuple[int, ...]], _Form] = {}
        self._expanding: dict[str, tuple[str, ...]] = {}  # by database: the IN lists' keys
        self._columns: dict[str, list[Any]] = {}  # by database: the result columns' types

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> list[Any]:
        """The statement's rows (attribute access by column name, as SQLAlchemy's)."""
        form, cursor = self._run(conn, params)
        try:
            fetched = cursor.fetchall()
            if form.row is None:
                self._describe(form, conn.dialect, cursor.description)
            processors = form.processors
            make = form.row._make
            if any(processors):
                return [make([v if p is None else p(v) for p, v in zip(processors, r,
                                                                       strict=True)])
                        for r in fetched]
            return [make(r) for r in fetched]
        finally:
            cursor.close()

    def count(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Run a statement that returns no rows; how many rows it changed."""
        _, cursor = self._run(conn, params)
        try:
            return int(cursor.rowcount)
        finally:
            cursor.close()

    def many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run a statement that returns no rows once for each of ``rows`` (the driver's
        ``executemany``; the rows have the same keys, and IN lists of the same lengths)."""
        if rows:
            _, cursor = self._run(conn, rows[0], rows)
            cursor.close()

    def _form(self, dialect: Dialect, params: Mapping[str, Any]) -> _Form:
        """The statement as ``dialect`` runs it for the IN lists of ``params``."""
        expanding = self._expanding.get(dialect.name)
        if expanding is None:
            expanding = self._expanding[dialect.name] = tuple(
                k for k, b in _compiled(self.stmt, dialect).binds.items()
                if b.expanding and b.required)  # not a literal list of the statement's
        key = (dialect.name, tuple(_size(len(params[k])) for k in expanding))
        form = self._forms.get(key)
        if form is None:
            form = self._forms[key] = self._compile(dialect, params, expanding)
        return form

    def _run(self, conn: Connection, params: Mapping[str, Any],
             many: Sequence[Mapping[str, Any]] | None = None) -> tuple[_Form, Any]:
        form = self._form(conn.dialect, params)
        sql = form.sql
        args = form.arguments(params) if many is None else [form.arguments(r) for r in many]
        cursor = None
        try:
            cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            for listen in conn.dispatch.before_cursor_execute:
                sql, args = listen(conn, cursor, sql, args, None, many is not None)
            if many is None:
                cursor.execute(sql, args)
            else:
                cursor.executemany(sql, args)
        except BaseException as exc:
            if cursor is not None:
                cursor.close()
            # As SQLAlchemy's own execute does: wrapped, and the connection invalidated when
            # the database dropped it or the process is being stopped mid-statement (so that
            # the pool replaces it).
            conn._handle_dbapi_exception(exc, sql, args, cursor, None)
        return form, cursor

    def _compile(self, dialect: Dialect, params: Mapping[str, Any],
                 expanding: tuple[str, ...]) -> _Form:
        compiled = _compiled(self.stmt, dialect)
        state = compiled.construct_expanded_state(
            {**params, **{k: [params[k][0]] * _size(len(params[k])) for k in expanding
                          if params[k]}})
        binds = compiled.binds
        getters: list[tuple[str, _Getter]] = []
        names = state.positiontup if state.positiontup is not None else list(state.parameters)
        for name in names:
            found = _EXPANDED.match(name)
            if name in params and name not in expanding:
                getters.append((name, _processed(dialect, binds[name], _key(name))))
            elif found and found["key"] in expanding:
                source = found["key"]
                getters.append((name, _processed(dialect, binds[source],
                                                 _item(source, int(found["index"]) - 1))))
            else:  # a value the statement holds itself (a literal of its WHERE)
                value = state.parameters[name]
                getters.append((name, _processed(dialect, binds.get(name), _constant(value))))
        return _Form(state.statement, getters, state.positiontup is not None)

    def _describe(self, form: _Form, dialect: Dialect, description: Sequence[Any]) -> None:
        columns = self._columns.get(dialect.name)
        if columns is None:
            columns = self._columns[dialect.name] = [
                c.type for c in self.stmt.exported_columns]  # type: ignore[attr-defined]
        processors = [t.dialect_impl(dialect).result_processor(dialect, d[1])
                      for t, d in zip(columns, description, strict=True)]
        # The row class last: another thread that finds it set finds the processors too.
        form.processors = processors
        form.row = namedtuple("Row", [d[0] for d in description], rename=True)  # type: ignore[misc]


def _key(name: str) -> _Getter:
    return lambda params: params[name]


def _compiled(stmt: ClauseElement, dialect: Dialect) -> SQLCompiler:
    compiled = stmt.compile(dialect=dialect)
    assert isinstance(compiled, SQLCompiler)
    return compiled


def _constant(value: Any) -> _Getter:
    return lambda _params: value


def _item(name: str, index: int) -> _Getter:
    """The list's ``index``-th value; past its end, its last (see :func:`_size`)."""

    def get(params: Mapping[str, Any]) -> Any:
        values = params[name]
        return values[index] if index < len(values) else values[-1]

    return get


def _size(length: int) -> int:
    """The size of IN list a list of ``length`` values is sent as: a power of two."""
    return 1 << (length - 1).bit_length() if length else 0


def _processed(dialect: Dialect, bind: Any, get: _Getter) -> _Getter:
    """``get``, then the bound type's own conversion for this database, if it has one."""
    process = None if bind is None else bind.type.dialect_impl(dialect).bind_processor(dialect)
    if process is None:
        return get
    return lambda params: process(get(params))
