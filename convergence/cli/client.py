"""What the CLI's commands ask of a stack engine, whichever mode it runs in: :class:`StackClient`.

Two implementations with the same methods: :class:`convergence.cli.local.LocalClient`
(embedded: the use cases of ``convergence.services`` on this process's store) and
:class:`convergence.cli.remote.RemoteClient` (remote mode: Heat's API over HTTP, chosen by
``--url`` / ``CONVERGENCE_URL``). ``convergence.cli.state.open_client`` hands a command the
one its invocation needs, so that every command is written once, not once a mode. Both answer
with the same plain dicts (Heat's field names, shaped by ``convergence.cli.output``) and the
same views, so the output is the same in both modes.

Callers: the command modules (``stack_write_cmd``, ``stack_read_cmd``, ``resource_cmd``,
``event_cmd``, ``stack_info_cmd``, ``template_cmd``, ``services_cmd``) and
``convergence.cli.follow``. This module imports neither client: each is imported by
``open_client`` when a command runs, so that the command tree (``--help``) loads neither
the store nor the HTTP client, and remote mode never loads the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from convergence.cli.listing import EventListing, ResourceListing
    from convergence.cli.progress import View
    from convergence.heat_fields import StackQuery
    from convergence.ports.views import EventView, StackView
    from convergence.runtime import Runtime
    from convergence.settings import Settings

class Session(Protocol):
    """What the embedded client needs of an invocation (``convergence.cli.state.CliState``)."""

    @property
    def tenant(self) -> str: ...

    @property
    def embedded(self) -> bool: ...

    def settings(self) -> Settings: ...

    def runtime(self) -> Runtime: ...


# The resource type stack-level events carry (the stack's own status changes), in both modes.
STACK_TYPE = "OS::Heat::Stack"


@dataclass(frozen=True, slots=True)
class Request:
    """A request the engine accepted: the stack as it was then, and where its events start
    (remote mode: the last event id before it; the embedded client reads the store instead)."""

    stack: StackView
    after: int = 0


class Refused(Exception):
    """A template that does not validate (``template validate``): each problem as a line of
    text and as a JSON object, as the engine or the API reported it."""

    def __init__(self, lines: Sequence[str], errors: Sequence[Mapping[str, Any]]) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)
        self.errors = [dict(e) for e in errors]


class StackClient(Protocol):
    """The stack engine as the CLI's commands see it (one tenant's)."""

    # Stacks ------------------------------------------------------------------------------

    def find_stack(self, name: str) -> StackView:
        """A stack by name or id, as it is now (embedded: work on it that no live process is
        on any more is finished first)."""
        ...

    def stack_rows(self, query: StackQuery) -> list[dict[str, Any]]: ...

    def stack_detail(self, s: StackView) -> dict[str, Any]: ...

    def stack_template(self, s: StackView) -> dict[str, Any]: ...

    def stack_environment(self, s: StackView) -> dict[str, Any]: ...

    def stack_files(self, s: StackView) -> dict[str, Any]: ...

    # Requests ----------------------------------------------------------------------------

    def preview_create(self, name: str, text: str, *, files: Mapping[str, str],
                       environments: Sequence[Any], parameters: Mapping[str, Any],
                       timeout_mins: int | None, disable_rollback: bool) -> dict[str, Any]: ...

    def preview_update(self, s: StackView, text: str | None, *, files: Mapping[str, str],
                       environments: Sequence[Any], parameters: Mapping[str, Any],
                       existing: bool) -> dict[str, Any]: ...

    def create_stack(self, name: str, text: str, *, files: Mapping[str, str],
                     environments: Sequence[Any], parameters: Mapping[str, Any],
                     timeout_mins: int | None, disable_rollback: bool,
                     observe: bool = False, cloud: str | None = None) -> Request: ...

    def update_stack(self, name: str, text: str | None, *, files: Mapping[str, str] | None,
                     environments: Sequence[Any], parameters: Mapping[str, Any] | None,
                     existing: bool, timeout_mins: int | None, disable_rollback: bool | None,
                     watch: bool, converge: bool = False,
                     observe: bool | None = None) -> Request:
        """``watch``: the caller follows the request (remote mode notes where its events
        start); ``disable_rollback`` None keeps the stack's setting."""
        ...

    def cancel_stack(self, name: str, *, rollback: bool, watch: bool) -> Request: ...

    def check_stack(self, name: str, *, watch: bool) -> Request:
        """Look at every resource in the cloud; change nothing."""
        ...

    def delete_stack(self, name: str, *, watch: bool) -> Request: ...

    def follows(self, wait: bool) -> bool:
        """Whether a request is followed to its end here (``--wait``; embedded without a
        broker: always, the work runs in this process)."""
        ...

    def follow(self, request: Request, view: View | None) -> StackView:
        """Run or wait for the request until it finished, showing progress on ``view``;
        Ctrl-C exits 130 saying what goes on. Returns the stack as it ended."""
        ...

    def stack_events(self, s: StackView) -> list[EventView]:
        """Every event of the stack, oldest first."""
        ...

    # Events ------------------------------------------------------------------------------

    def event_page(self, s: StackView, listing: EventListing) -> list[EventView]: ...

    def follow_events(self, name: str, listing: EventListing,
                      on_event: Callable[[EventView], None]) -> None:
        """Every event of stack ``name`` until its current request ended (``--follow``)."""
        ...

    # Resources ---------------------------------------------------------------------------

    def resource_rows(self, s: StackView,
                      listing: ResourceListing) -> list[dict[str, Any]]: ...

    def resource_detail(self, s: StackView, resource_name: str) -> dict[str, Any]: ...

    def nested_stack(self, s: StackView, resource_name: str) -> StackView | None: ...

    def mark_resource(self, s: StackView, resource: str, *, unhealthy: bool,
                      reason: str) -> None: ...

    def clear_hook(self, s: StackView, resource: str, hook: str) -> None:
        """Let ``resource`` go on past ``hook`` (Heat's ``unset_hook`` signal)."""
        ...

    # The engine itself -------------------------------------------------------------------

    def resource_types(self, *, name: str | None, support_status: str | None,
                       with_description: bool) -> list[dict[str, Any]]: ...

    def resource_type(self, type_name: str) -> dict[str, Any]: ...

    def resource_type_template(self, type_name: str, template_type: str) -> dict[str, Any]: ...

    def validate(self, file: Path, *, root: Path, env_files: Sequence[Path],
                 params: Sequence[str]) -> dict[str, Any]:
        """Heat's validate answer for ``file`` and the files it references (keys relative to
        ``root``); raises :class:`Refused` when the template does not validate."""
        ...

    def list_services(self) -> list[dict[str, Any]]: ...
