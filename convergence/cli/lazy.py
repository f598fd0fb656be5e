"""Command groups whose subcommands are imported only when they are asked for.

Callers: ``convergence.cli`` (the root ``convergence`` group) and ``convergence.cli.groups``
(``stack``, ``resource``, ``event``, ``output``). A :class:`LazyGroup` maps each subcommand's
name to ``"module:attribute"``; the module is imported when click looks the name up (to run it,
or to show its line in the group's ``--help``), never before. So ``convergence --help`` imports
the command modules of the top level only, and those import nothing heavy at module level: the
store, the engine, the HTTP client and their libraries are imported by the functions that use
them (``convergence.cli.client.open_client`` and the command bodies).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click


class LazyGroup(click.Group):
    """A click group with subcommands given as ``{name: "module:attribute"}``."""

    def __init__(self, *args: Any, lazy_subcommands: Mapping[str, str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_subcommands = dict(lazy_subcommands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_subcommands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.lazy_subcommands.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module_name, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{target} is not a click command")
        return command
