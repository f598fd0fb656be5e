"""Logging: structlog configured once per entry point, stdlib logging routed through it.

Callers: each entry point configures logging once at start (:func:`configure_logging`): the
CLI (``convergence.cli``, console mode, WARNING by default so that progress output stays clean;
``convergence api`` runs under it) and the Celery workers (``convergence.workers.app``, JSON
lines). Everything else just logs, through structlog or plain
``logging.getLogger(__name__)`` (Celery, SQLAlchemy and our own modules use the latter): both
end up in the same processors, so the fields bound with :func:`bind` appear on every line.

``bind`` is called by the engine around each step (``stack``, ``traversal``, ``generation``,
``resource``, ``node``) so that a line logged deep inside a plugin says which step it was.

Never log parameter values or hidden data: fields whose names say they may hold them
(``parameters``, ``properties``, ``password``, ...) are masked before rendering, whatever the
caller passed.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any, Literal, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

Mode = Literal["console", "json"]

# Fields that may carry user secrets: parameter values, resolved properties (which can hold
# hidden parameters), attributes and outputs (a generated password), whole templates/files.
SENSITIVE_FIELDS = frozenset({
    "parameters", "params", "parameter_values", "properties", "props", "attributes",
    "outputs", "environment", "environments", "files", "template", "password", "secret",
    "token", "credentials", "auth",
})
MASK = "******"

_HANDLER_NAME = "convergence"


def redact(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Mask the values of fields that may hold parameter values or hidden data."""
    for key in event_dict.keys() & SENSITIVE_FIELDS:
        event_dict[key] = MASK
    return event_dict


def _stack_as_id(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Show the bound ``stack`` field as ``stack_id`` (console mode only)."""
    if isinstance(event_dict.get("stack"), str) and "\n" not in event_dict["stack"]:
        event_dict["stack_id"] = event_dict.pop("stack")
    return event_dict


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time (test runners swap it)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact,
    ]


def configure_logging(mode: Mode = "console", level: int | str = logging.WARNING, *,
                      stream: TextIO | None = None) -> None:
    """Configure structlog and the stdlib root logger; calling it again replaces the setup.

    ``console``: readable lines on stderr (the CLI, ``convergence api`` included). ``json``: one
    JSON object per line (the workers). ``stream`` overrides where lines go (default: the
    current stderr).
    """
    if isinstance(level, str):
        level = logging.getLevelNamesMapping().get(level.upper(), logging.WARNING)
    shared = _shared_processors()
    renderer: Processor
    if mode == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
        shared = [*shared, structlog.processors.format_exc_info]
    else:
        # The console renderer prints a ``stack`` field as a stack trace, on lines of its own.
        shared = [*shared, _stack_as_id]
        # Plain tracebacks: a rich one shows local variables, which can hold secrets.
        renderer = structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback)
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[structlog.stdlib.ExtraAdder(), *shared],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler: logging.Handler = logging.StreamHandler(stream) if stream is not None \
        else _StderrHandler()
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


def get_logger(name: str | None = None) -> Any:
    """A structlog logger (bound fields and context variables are added to its lines)."""
    return structlog.stdlib.get_logger(name)


class Bound:
    """The context manager :func:`bind` returns: binds on entry, restores on exit."""

    __slots__ = ("_fields", "_tokens")

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields
        self._tokens: Mapping[str, Any] = {}

    def __enter__(self) -> None:
        self._tokens = structlog.contextvars.bind_contextvars(**self._fields)

    def __exit__(self, *_exc: object) -> None:
        structlog.contextvars.reset_contextvars(**self._tokens)


def bind(*, stack: str | None = None, traversal: str | None = None,
         generation: int | None = None, resource: str | None = None,
         node: int | None = None) -> Bound:
    """Add these fields to every line logged (in this context) until the block ends.

    ``with bind(stack=..., resource=...):`` -- like ``structlog.contextvars.bound_contextvars``
    (values bound outside come back afterwards), with context-variable tokens, which is
    cheaper: the engine enters one per step.
    """
    fields: dict[str, Any] = {}
    if stack is not None:
        fields["stack"] = stack
    if traversal is not None:
        fields["traversal"] = traversal
    if generation is not None:
        fields["generation"] = generation
    if resource is not None:
        fields["resource"] = resource
    if node is not None:
        fields["node"] = node
    return Bound(fields)
