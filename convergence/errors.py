"""Errors of the engine's use cases, apart from user-input errors in templates.

Raised by the use cases (``convergence.services`` and the modules beside it), the store (a
stack name in use) and the plugins' type listings; a leaf that every layer may import. The API
maps each family to an HTTP status in one place (``convergence.api.errors``); the CLI prints
them (``convergence.cli.common``). Template errors are ``convergence.template.errors``'.
"""

from __future__ import annotations


class ConvergenceError(Exception):
    """Base of the use-case errors."""


class NotFound(ConvergenceError):
    """No such stack (for this tenant), resource, output or event."""


class Conflict(ConvergenceError):
    """The request conflicts with the stack's state (a name in use, a stack being deleted)."""


class PreconditionFailed(ConvergenceError):
    """``If-Match`` named a generation the stack has moved past."""


class InvalidParameter(ConvergenceError):
    """A request parameter's value cannot be used (an event list's marker that is not an
    event of the stack); the message names the parameter."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


class CloudRefused(ConvergenceError):
    """The cloud refused what a request needs of it before anything is stored (the trust
    that lets the engine work for the caller): ``retryable``, it may answer later."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class NotSupported(ConvergenceError):
    """What the request asks is not something this resource (or stack) does: Heat's
    ``NotSupported`` (a signal to a resource type that takes none)."""


class ConfigurationError(ConvergenceError):
    """The engine cannot work as configured: its encryption keys are missing, malformed, or
    not the ones the stored secrets were sealed with. The message says what to set, and never
    holds a key or a secret."""
