"""Helpers shared by the template tests: parse or validate a snippet, list its problems."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

import pytest

from convergence.plugins.registry import PluginRegistry
from convergence.template import TemplateError, parse_template, validate_stack

CATALOG = PluginRegistry.from_entry_points()


def hot(body: str, version: str = "2018-08-31") -> str:
    return f"heat_template_version: {version}\n" + textwrap.dedent(body)


def problems(text: str, **kwargs: Any) -> list[str]:
    """Every problem validation reports, as 'path: message' lines (empty when valid)."""
    try:
        validate_stack(text, catalog=CATALOG, **kwargs)
    except TemplateError as exc:
        return [str(p) for p in exc.problems]
    return []


def parse_problems(text: str, files: Mapping[str, str] | None = None) -> list[str]:
    try:
        parse_template(text, files=files)
    except TemplateError as exc:
        return [str(p) for p in exc.problems]
    return []


@pytest.fixture
def catalog() -> PluginRegistry:
    return CATALOG
