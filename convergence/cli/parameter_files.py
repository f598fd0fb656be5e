"""``--parameter-file KEY=FILE``: a parameter whose value is a file's content, as heatclient
reads it (``heatclient.common.utils.format_parameter_file``).

Callers: ``convergence.cli.stack_write_cmd`` (``stack create|update``, with or without
``--dry-run``). A relative FILE is read relative to the template's folder, as heatclient
resolves it against the template's URL (relative to the current folder when no template is
given: ``stack update --existing``). A file that is not UTF-8 text is sent base64-encoded, as
heatclient sends it. Values given this way win over ``-P`` values of the same key.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path

import click

MAX_BYTES = 1024 * 1024


def read_parameter_files(values: Sequence[str], template: Path | None) -> dict[str, str]:
    """``KEY=FILE`` options as a map of each key to the file's content."""
    base = template.resolve().parent if template is not None else Path.cwd()
    params: dict[str, str] = {}
    for item in values:
        key, sep, name = item.partition("=")
        if not sep or not key.strip() or not name:
            raise click.BadParameter(f"expected KEY=FILE, got {item!r}",
                                     param_hint="--parameter-file")
        path = base / Path(name).expanduser()
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise click.BadParameter(f"{key}: cannot read {path}: {exc.strerror or exc}",
                                     param_hint="--parameter-file") from None
        if len(data) > MAX_BYTES:
            raise click.BadParameter(f"{key}: {path} is larger than {MAX_BYTES} bytes",
                                     param_hint="--parameter-file")
        try:
            params[key.strip()] = data.decode("utf-8")
        except UnicodeDecodeError:  # heatclient's way: base64, wrapped as encodebytes does
            params[key.strip()] = base64.encodebytes(data).decode("ascii")
    return params
