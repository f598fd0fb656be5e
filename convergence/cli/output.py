"""How the CLI shows stacks, resources, events and outputs: Heat's field names, five formats.

Callers: every command module of ``convergence.cli`` and the two clients
(``convergence.cli.local``, ``convergence.cli.remote``). The ``*_fields``
functions turn the store's views into plain dicts keyed by Heat's API field names
(``stack_name``, ``stack_status``, ``resource_status_reason``, ``event_time``, ...) plus our
extensions (``generation``, ``observed_generation``), so that ``-f json`` and ``-f yaml`` are
stable machine-readable answers; ``-f table`` renders the same dicts with ``rich``.

As cliff (``openstack ...``) does: ``-f value`` prints the values only, space-separated, a row a
line (a show command: a value a line); ``-f csv`` a quoted header row, then the rows; ``-c NAME``
(repeatable) keeps those columns (a show command: those fields), in the command's order. A
column is named by its header or its field (``-c "Stack Name"``, ``-c stack_name``), and any
field of the rows may be named, shown in the table or not (``-c description``).

Imported when the command tree is built (for ``-f``/``-c``): ``rich`` and ``yaml`` are imported
by the functions that print. Heat's time format and a stack's outputs are
``convergence.heat_fields``'s (light: the standard library only), which the API shows too.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click

from convergence.heat_fields import iso, output_items

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from convergence.ports.views import EventView, RecordView, StackView

Format = Literal["table", "json", "yaml", "value", "csv"]
FORMATS = ("table", "json", "yaml", "value", "csv")

F = TypeVar("F", bound=Callable[..., Any])
_COLUMNS = "convergence.columns"  # where ``-c`` leaves its names, in the context's meta


def _remember_columns(ctx: click.Context, _: click.Parameter, value: tuple[str, ...]) -> None:
    ctx.meta[_COLUMNS] = tuple(value)


column_option = click.option(
    "-c", "--column", "columns", multiple=True, metavar="COLUMN", expose_value=False,
    callback=_remember_columns,
    help="Only this column (a show command: this field); repeatable.")


def formats(default: str = "table") -> Callable[[F], F]:
    """``-f/--format`` (passed as ``fmt``) and ``-c/--column`` (read by :func:`emit_list` and
    :func:`emit_record`), with the command's default format."""
    def decorate(f: F) -> F:
        f = column_option(f)
        return click.option(
            "-f", "--format", "fmt", type=click.Choice(FORMATS), default=default,
            show_default=True,
            help="Output format: a table, JSON/YAML with Heat's field names, the values "
                 "alone (value) or CSV.")(f)
    return decorate


format_option = formats()

# Columns of the tables: (field, header).
STACK_COLUMNS = (("id", "ID"), ("stack_name", "Stack Name"), ("stack_status", "Stack Status"),
                 ("creation_time", "Creation Time"), ("updated_time", "Updated Time"))
RESOURCE_COLUMNS = (("resource_name", "Resource Name"),
                    ("physical_resource_id", "Physical Resource ID"),
                    ("resource_type", "Resource Type"), ("resource_status", "Resource Status"),
                    ("updated_time", "Updated Time"))
EVENT_COLUMNS = (("resource_name", "Resource Name"), ("id", "ID"),
                 ("resource_status", "Resource Status"),
                 ("resource_status_reason", "Resource Status Reason"),
                 ("event_time", "Event Time"))
OUTPUT_COLUMNS = (("output_key", "Output Key"), ("description", "Description"))


def console(*, stderr: bool = False) -> Console:
    """A console on the current stdout (or stderr); wide and plain when not a terminal."""
    from rich.console import Console

    probe = Console(stderr=stderr)
    if probe.is_terminal:
        return probe
    return Console(stderr=stderr, width=10_000, highlight=False, color_system=None)


# Views -> Heat-shaped dicts ------------------------------------------------------------------

def stack_fields(s: StackView) -> dict[str, Any]:
    """A stack as ``stack list`` shows it (Heat's basic keys, plus the generations)."""
    return {
        "id": s.id,
        "stack_name": s.name,
        "stack_status": s.stack_status,
        "stack_status_reason": s.status_reason,
        "creation_time": iso(s.created_at),
        "updated_time": iso(s.updated_at),
        "generation": s.generation,
        "observed_generation": s.observed_generation,
    }


def stack_row(s: StackView, description: str) -> dict[str, Any]:
    """A stack as ``stack list`` shows it: the basic keys and its template's description."""
    fields = stack_fields(s)
    row = {"id": fields.pop("id"), "stack_name": fields.pop("stack_name"),
           "description": description, **fields}
    if s.deleted_at is not None:
        row["deletion_time"] = iso(s.deleted_at)
    return row


def stack_detail(s: StackView, *, description: str = "",
                 parameters: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A stack as ``stack show`` shows it: the basic keys, settings, every parameter's value
    (hidden ones masked, as the API answers) and outputs."""
    out = stack_row(s, description)
    out["timeout_mins"] = s.timeout_mins
    out["disable_rollback"] = s.disable_rollback
    if parameters is not None:
        out["parameters"] = dict(parameters)
    out["outputs"] = output_items(s)
    return out


def resource_fields(r: RecordView) -> dict[str, Any]:
    return {
        "resource_name": r.name,
        "physical_resource_id": r.physical_id or "",
        "resource_type": r.type,
        "resource_status": f"{r.action}_{r.status}",
        "resource_status_reason": r.status_reason,
        "updated_time": iso(r.updated_at),
    }


def resource_detail(r: RecordView, records: Sequence[RecordView]) -> dict[str, Any]:
    """A resource as ``resource show`` shows it (``required_by`` from the other records)."""
    out = resource_fields(r)
    out["logical_resource_id"] = r.name
    out["creation_time"] = iso(r.created_at)
    out["required_by"] = sorted({o.name for o in records if r.id in o.requires})
    out["attributes"] = dict(r.attributes)
    return out


PREVIEW_RESOURCE_KEYS = ("resource_name", "resource_type", "required_by", "properties")


def create_preview(stack: Mapping[str, Any]) -> dict[str, Any]:
    """``stack create --dry-run``: the would-be stack (Heat's preview, keys sorted as
    heatclient shows them), each resource with its type, dependants and properties."""
    resources = [{k: r.get(k) for k in PREVIEW_RESOURCE_KEYS}
                 for r in stack.get("resources") or [] if isinstance(r, Mapping)]
    return {"description": stack.get("description") or "",
            "disable_rollback": stack.get("disable_rollback"),
            "parameters": dict(stack.get("parameters") or {}),
            "resources": resources,
            "stack_name": stack.get("stack_name"),
            "timeout_mins": stack.get("timeout_mins")}


def update_preview(changes: Mapping[str, Any]) -> dict[str, Any]:
    """``stack update --dry-run``: Heat's ``resource_changes``, a bucket a field (sorted, as
    heatclient shows them), each resource as its name and type."""
    return {bucket: [{"resource_name": i.get("resource_name"),
                      "resource_type": i.get("resource_type")}
                     for i in items if isinstance(i, Mapping)]
            for bucket, items in sorted(changes.items()) if isinstance(items, list)}


def event_fields(e: EventView) -> dict[str, Any]:
    return {
        "resource_name": e.resource_name,
        "id": e.id,
        "resource_status": f"{e.action}_{e.status}",
        "resource_status_reason": e.reason,
        "physical_resource_id": e.physical_resource_id or "",
        "event_time": iso(e.created_at),
    }


def event_line(e: EventView) -> str:
    """One event the way ``openstack stack event list`` logs it."""
    when = (iso(e.created_at) or "").replace("T", " ")
    line = f"{when} [{e.resource_name}]: {e.action}_{e.status}"
    return f"{line}  {e.reason}" if e.reason else line


# Rendering -----------------------------------------------------------------------------------

def _cell(value: Any) -> Text:
    import yaml
    from rich.text import Text

    if value is None:
        return Text("")
    if isinstance(value, str):
        return Text(value)
    if isinstance(value, Mapping | list | tuple):
        if not value:
            return Text("")
        return Text(yaml.safe_dump(_plain(value), sort_keys=False,
                                   default_flow_style=False).rstrip())
    return Text(json.dumps(value) if isinstance(value, bool) else str(value))


def _plain(value: Any) -> Any:
    """A structure YAML can dump safely (tuples as lists, unknown objects as strings)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def dump(data: Any, fmt: Format) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, default=str)
    import yaml

    return yaml.safe_dump(_plain(data), sort_keys=False, default_flow_style=False).rstrip()


def _table(con: Console) -> Table:
    from rich import box
    from rich.table import Table

    return Table(box=box.SQUARE if con.is_terminal else box.ASCII, show_lines=False,
                 header_style="bold" if con.is_terminal else None)


def _wanted_columns() -> tuple[str, ...]:
    ctx = click.get_current_context(silent=True)
    return tuple(ctx.meta.get(_COLUMNS, ())) if ctx is not None else ()


def _normal(name: str) -> str:
    """cliff's column matching: ``Stack Name``, ``stack name`` and ``stack_name`` are one."""
    return name.lower().strip().replace(" ", "_")


def select_columns(columns: Sequence[tuple[str, str]], fields: Sequence[str],
                   wanted: Sequence[str]) -> list[tuple[str, str]]:
    """The (field, header) pairs ``-c`` keeps: the table's columns, then any other field, in
    that order; all the table's columns when no ``-c`` was given."""
    if not wanted:
        return list(columns)
    shown = {key for key, _ in columns}
    candidates = list(columns) + [(k, k) for k in fields if k not in shown]
    requested = {_normal(w) for w in wanted}
    chosen = [(key, header) for key, header in candidates
              if _normal(key) in requested or _normal(header) in requested]
    if not chosen:
        raise click.UsageError(f"No recognized column names in {list(wanted)}. Recognized "
                               f"columns are {[header for _, header in candidates]}.")
    return chosen


def value_text(value: Any) -> str:
    """A value as ``-f value`` and ``-f csv`` print it: structures as JSON, the rest by str
    (cliff's way: ``None``, ``True``)."""
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(_plain(value))
    return str(value)


def _csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """CSV as cliff writes it: every non-numeric cell quoted, the header too."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n",
                        escapechar="\\")
    writer.writerow(header)
    for row in rows:
        writer.writerow([v if isinstance(v, int | float) and not isinstance(v, bool)
                         else "" if v is None else value_text(v) for v in row])
    return buffer.getvalue().rstrip("\n")


def emit_list(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]],
              fmt: Format) -> None:
    """Rows as a table (the given columns), the values or CSV of those columns, or every
    field as JSON/YAML; ``-c`` narrows any of them."""
    wanted = _wanted_columns()
    fields = list(dict.fromkeys(k for r in rows for k in r)) or list(wanted)
    chosen = select_columns(columns, fields, wanted)
    if fmt in ("json", "yaml"):
        data = [dict(r) for r in rows] if not wanted else \
            [{key: r.get(key) for key, _ in chosen} for r in rows]
        click.echo(dump(data, fmt))
        return
    if fmt == "value":
        for row in rows:
            click.echo(" ".join(value_text(row.get(key)) for key, _ in chosen))
        return
    if fmt == "csv":
        click.echo(_csv([header for _, header in chosen],
                        [[row.get(key) for key, _ in chosen] for row in rows]))
        return
    con = console()
    table = _table(con)
    for _, header in chosen:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row.get(key)) for key, _ in chosen))
    con.print(table)


def emit_record(record: Mapping[str, Any], fmt: Format) -> None:
    """One object as a Field/Value table, JSON/YAML, its values a line each, or CSV (a
    header row and one row); ``-c`` keeps the fields it names."""
    wanted = _wanted_columns()
    keys = [key for key, _ in select_columns([(k, k) for k in record], [], wanted)]
    chosen = {key: record[key] for key in keys}
    if fmt in ("json", "yaml"):
        click.echo(dump(chosen, fmt))
        return
    if fmt == "value":
        for value in chosen.values():
            click.echo(value_text(value))
        return
    if fmt == "csv":
        click.echo(_csv(list(chosen), [list(chosen.values())]))
        return
    con = console()
    table = _table(con)
    from rich.text import Text

    table.add_column("Field", no_wrap=True)
    table.add_column("Value", overflow="fold")
    for key, value in chosen.items():
        table.add_row(Text(key), _cell(value))
    con.print(table)
