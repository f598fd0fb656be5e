"""What the stack commands share: errors as messages and exit codes, Ctrl-C, reading input.

Callers: every command module of ``convergence.cli`` that acts on stacks
(``stack_write_cmd``, ``stack_read_cmd``, ``resource_cmd``, ``event_cmd``, ``stack_info_cmd``,
``admin_cmd``, ``demo_cmd``) and the two clients (``convergence.cli.local``,
``convergence.cli.remote``) for :func:`interruptible`. Light on purpose: it is imported when
the command tree is built (``--help``), so the template package is imported only when input
is read or a template error has to be printed.

Exit codes: 0 success; 1 refused input (each problem on its own line with its path), a stack
or resource not found, a conflict, or a failed request; 2 usage error; 130 interrupted.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from convergence.errors import ConvergenceError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def report_errors(f: F) -> F:
    """Turn the use cases' errors into messages and exit codes."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except ConvergenceError as exc:
            raise click.ClickException(str(exc)) from None
        except ValueError as exc:
            # A TemplateError (a ValueError) can only have been raised once the template
            # package was imported: it is not imported here for the commands that never do.
            errors = sys.modules.get("convergence.template.errors")
            if errors is None or not isinstance(exc, errors.TemplateError):
                raise
            n = len(exc.problems)
            click.echo(f"Error: the input was refused ({n} error{'s' if n != 1 else ''}):",
                       err=True)
            for p in exc.problems:
                click.echo(str(p), err=True)
            sys.exit(EXIT_FAILED)

    return cast(F, wrapper)


@contextmanager
def interruptible(message: str) -> Iterator[None]:
    """Ctrl-C: print ``message`` (what the interruption leaves behind) and exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        click.echo(message, err=True)
        sys.exit(EXIT_INTERRUPTED)


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(f"{path}: not UTF-8 text (byte {exc.start})") from None


def read_input(template: Path | None, env_files: Sequence[Path],
               files_dir: Path | None) -> tuple[str | None, dict[str, str], list[Any]]:
    """The template text, the files map and the environments, as a Heat client sends them.

    The files map holds only the files the template and the environments reference, followed
    recursively (``convergence.cli.files``), keyed relative to ``--files-dir`` or the
    template's folder; environment template mappings are rewritten to those keys. Raises
    TemplateError for a bad environment or a referenced file that cannot be sent.
    """
    from convergence.cli.files import root_folder, sent_files

    text = read_text(template) if template is not None else None
    files, envs = sent_files(template, text, env_files,
                             root_folder(template, env_files, files_dir))
    return text, files, envs
