"""Heat's fields that every edge shows alike and that import nothing heavy: its time format,
a stack's outputs as Heat lists them, and the stack list's query (filters, order, page).

Callers: the API's answer shapes (``convergence.api.views``, ``convergence.api.stack_extras``),
the stack list's paging (``convergence.services.pages``) and the command line in both modes
(``convergence.cli.output``, ``convergence.cli.stack_read_cmd``, the clients). It sits below
the use cases, with the ports, so that the CLI's remote mode reads the same shapes without
loading the use cases, the engine or the store (``tests/cli/test_startup.py``): it imports the
standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from convergence.ports.views import StackView


def iso(ts: float | None) -> str | None:
    """Heat's time format: ``2024-05-01T12:00:00Z``."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def output_items(s: StackView) -> list[dict[str, Any]]:
    """Heat's outputs: ``output_key``, ``output_value``, ``description`` [, ``output_error``]."""
    items = []
    for key, value in s.outputs.items():
        item: dict[str, Any] = {"output_key": key, "output_value": None, "description": ""}
        if isinstance(value, Mapping):
            item["output_value"] = value.get("value")
            item["description"] = value.get("description") or ""
            if value.get("error"):
                item["output_error"] = value["error"]
        else:
            item["output_value"] = value
        items.append(item)
    return items


# The stack list's query ------------------------------------------------------------------------

FILTER_KEYS = ("id", "name", "status", "action")
"""The stack list's filters (``GET /stacks?status=...``, ``stack list --filter``)."""


@dataclass(frozen=True, slots=True)
class StackQuery:
    """One page of the stack list. A filter given several values matches any of them; the
    sort keys are Heat's (``convergence.services.pages.SORT_KEYS``)."""

    filters: Mapping[str, Sequence[str]] = field(default_factory=dict)
    sort_keys: Sequence[str] = ("creation_time",)
    descending: bool = True  # Heat's default: the newest first
    marker: str | None = None  # the page starts after this stack id
    limit: int | None = None
    include_deleted: bool = False
    show_nested: bool = False  # nested stacks are listed too (Heat's ``show_nested``)
