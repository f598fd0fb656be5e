"""The command groups ``stack``, ``resource``, ``event`` and ``output``: which command is where.

Callers: ``convergence.cli`` registers these groups (lazily) on the ``convergence`` group. Each
group names its subcommands as ``"module:attribute"`` (``convergence.cli.lazy.LazyGroup``), so
a group's module is imported only when one of its commands is run or listed. The shapes are
heatclient's: ``stack create|update|cancel|delete|list|show``, ``stack resources|events|
outputs`` beside ``resource list``, ``event list`` and ``output list``, ``stack resource
list|show|mark unhealthy``, ``stack template|environment show``, ``stack file list``,
``stack failures list``, ``stack hook poll|clear``; ``resource type list|show`` and
``resource mark unhealthy`` (``mark-unhealthy`` too) beside ``resource list|show``.
"""

from __future__ import annotations

import click

from convergence.cli.lazy import LazyGroup

_PKG = "convergence.cli"
_WRITE = f"{_PKG}.stack_write_cmd"
_READ = f"{_PKG}.stack_read_cmd"
_INFO = f"{_PKG}.stack_info_cmd"
_RESOURCE = f"{_PKG}.resource_cmd"
_EVENT = f"{_PKG}.event_cmd"


@click.group(cls=LazyGroup, lazy_subcommands={
    "create": f"{_WRITE}:create", "update": f"{_WRITE}:update", "cancel": f"{_WRITE}:cancel",
    "check": f"{_WRITE}:check",
    "delete": f"{_WRITE}:delete", "list": f"{_READ}:list_", "show": f"{_READ}:show",
    "resources": f"{_RESOURCE}:resource_list", "events": f"{_EVENT}:event_list",
    "outputs": f"{_READ}:output_list", "resource": f"{_RESOURCE}:stack_resource",
    "template": f"{_INFO}:stack_template", "environment": f"{_INFO}:stack_environment",
    "file": f"{_INFO}:stack_file", "failures": f"{_RESOURCE}:failures",
    "hook": f"{_PKG}.hook_cmd:hook",
})
def stack() -> None:
    """Create, update, delete and look at stacks."""


@click.group(cls=LazyGroup, lazy_subcommands={
    "list": f"{_RESOURCE}:resource_list", "show": f"{_RESOURCE}:resource_show",
    "type": f"{_RESOURCE}:resource_type", "mark": f"{_RESOURCE}:mark",
    "mark-unhealthy": f"{_RESOURCE}:mark_unhealthy",
})
def resource() -> None:
    """Look at a stack's resources."""


@click.group(cls=LazyGroup, lazy_subcommands={"list": f"{_EVENT}:event_list"})
def event() -> None:
    """Look at a stack's events."""


@click.group(cls=LazyGroup, lazy_subcommands={
    "list": f"{_READ}:output_list", "show": f"{_READ}:output_show",
})
def output() -> None:
    """Look at a stack's outputs."""
