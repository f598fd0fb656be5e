"""How the CLI shows stacks, resources, events and outputs: Heat's field names, three formats.

Callers: ``convergence.cli.stack_cmd`` and ``convergence.cli.demo_cmd``. The ``*_fields``
functions turn the store's views into plain dicts keyed by Heat's API field names
(``stack_name``, ``stack_status``, ``resource_status_reason``, ``event_time``, ...) plus our
extensions (``generation``, ``observed_generation``), so that ``-f json`` and ``-f yaml`` are
stable machine-readable answers; ``-f table`` renders the same dicts with ``rich``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import click
import yaml
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from convergence.api.views import iso as iso
from convergence.api.views import output_items as output_items
from convergence.store.views import EventView, RecordView, StackView

Format = Literal["table", "json", "yaml"]
FORMATS = ("table", "json", "yaml")

format_option = click.option(
    "-f", "--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
    help="Output format: a table, or JSON/YAML with Heat's field names.")

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


def stack_detail(s: StackView) -> dict[str, Any]:
    """A stack as ``stack show`` shows it: the basic keys, settings and outputs."""
    out = stack_fields(s)
    if s.deleted_at is not None:
        out["deletion_time"] = iso(s.deleted_at)
    out["timeout_mins"] = s.timeout_mins
    out["disable_rollback"] = s.disable_rollback
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
    return yaml.safe_dump(_plain(data), sort_keys=False, default_flow_style=False).rstrip()


def _table(con: Console) -> Table:
    return Table(box=box.SQUARE if con.is_terminal else box.ASCII, show_lines=False,
                 header_style="bold" if con.is_terminal else None)


def emit_list(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]],
              fmt: Format) -> None:
    """Rows as a table (the given columns), or every field as JSON/YAML."""
    if fmt != "table":
        click.echo(dump([dict(r) for r in rows], fmt))
        return
    con = console()
    table = _table(con)
    for _, header in columns:
        table.add_column(header, overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row.get(key)) for key, _ in columns))
    con.print(table)


def emit_record(record: Mapping[str, Any], fmt: Format) -> None:
    """One object as a Field/Value table, or as JSON/YAML."""
    if fmt != "table":
        click.echo(dump(dict(record), fmt))
        return
    con = console()
    table = _table(con)
    table.add_column("Field", no_wrap=True)
    table.add_column("Value", overflow="fold")
    for key, value in record.items():
        table.add_row(Text(key), _cell(value))
    con.print(table)
