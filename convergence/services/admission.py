"""What a request must be before it is looked at further: a stack name Heat accepts, and input
within the size limits.

Callers: the use cases that take new input (``convergence.services.templates``: create,
update and validate; ``convergence.services.preview``; ``convergence.services.stacks``: a new
stack's name), the API's validate route and the CLI's ``template validate`` (the limits,
:class:`SizeLimits`), so that the API and the CLI's embedded mode refuse the same things,
before anything is parsed or stored. Refusals are ``TemplateError`` (user input), which
the API answers 400 ``StackValidationFailed``, or 413 ``RequestLimitExceeded`` for a size, and
the CLI prints with exit code 1.

Sizes follow Heat's ``max_template_size`` ("maximum raw byte size of any template"): the
template and each document that comes with it (each file of the files map, which may be a
nested template, and each environment) may weigh at most ``Settings.max_template_bytes``.
Heat bounds the rest by its request body limit; here everything a stack is given (template,
files, environments and parameters together) may weigh at most ``Settings.max_request_bytes``,
however it comes, so that the CLI accepts no more than one API request could carry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from convergence.ports.views import TemplateContent
from convergence.settings import (
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_TEMPLATE_BYTES,
    Settings,
)
from convergence.template import Problems, TemplateError
from convergence.template.errors import STRUCTURE, SYNTAX

# Heat's rule (``heat.engine.stack.Stack``): a letter, then letters, digits, "_", "-" or ".",
# 255 characters at most.
STACK_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9_.-]{0,254}\Z")
_SHOWN_NAME = 300  # a longer name is cut in the message


def check_stack_name(name: object) -> None:
    """Refuse a new stack's name that Heat would refuse (Heat's message)."""
    if isinstance(name, str) and STACK_NAME.match(name):
        return
    if not isinstance(name, str):
        raise TemplateError.at("", f"Invalid stack name {name}, must be a string", STRUCTURE)
    shown = name if len(name) <= _SHOWN_NAME else name[:_SHOWN_NAME] + "..."
    raise TemplateError.at("", f"Invalid stack name {shown} must contain only alphanumeric "
                           'or "_-." characters, must start with alpha and must be 255 '
                           "characters or less.", STRUCTURE)


@dataclass(frozen=True, slots=True)
class SizeLimits:
    """Bytes: ``document`` for the template and each file or environment, ``total`` for all
    of them and the parameters together."""

    document: int = DEFAULT_MAX_TEMPLATE_BYTES
    total: int = DEFAULT_MAX_REQUEST_BYTES

    @classmethod
    def of(cls, settings: Settings) -> SizeLimits:
        return cls(document=settings.max_template_bytes, total=settings.max_request_bytes)


def size_of(value: Any) -> int:
    """The bytes of a document: UTF-8 text as is, anything else as compact JSON."""
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return size_of(text)


def _over(size: int, limit: int) -> str:
    return f"the document is {size} bytes, over the limit of {limit} bytes"


def check_sizes(template: Any, files: Mapping[str, Any] | None = None,
                environments: Sequence[Any] = (), parameters: Mapping[str, Any] | None = None,
                limits: SizeLimits | None = None) -> None:
    """Refuse input over the limits (every document over its limit is named)."""
    limits = limits or SizeLimits()
    problems = Problems()

    def weigh(where: str, document: Any) -> int:
        size = size_of(document)
        if size > limits.document:
            problems.add(where, _over(size, limits.document), SYNTAX)
        return size

    files = files or {}
    total = weigh("template", template)
    in_files = sum(weigh(f"files.{name}", text) for name, text in files.items())
    total += in_files + sum(weigh(f"environment[{i}]", doc)
                            for i, doc in enumerate(environments))
    if parameters:
        total += size_of(dict(parameters))
    if total > limits.total:
        problems.add("", f"the template, files ({len(files)} files, {in_files} bytes), "
                     f"environments and parameters are {total} bytes together, over the "
                     f"limit of {limits.total} bytes", SYNTAX)
    problems.raise_if_any()


def check_content(content: TemplateContent, settings: Settings) -> None:
    """:func:`check_sizes` of a stack's content, with the settings' limits."""
    check_sizes(content.text, content.files, content.environments, content.parameters,
                SizeLimits.of(settings))
