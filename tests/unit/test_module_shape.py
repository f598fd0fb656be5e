"""The shape of every module: a docstring that says what it is for, and a size one can read.

Every ``.py`` file under ``convergence/`` (packages' ``__init__.py`` and the Alembic revision
scripts included), under the top-level ``workers/`` and under the simulated cloud's package
(``simcloud/convergence_simcloud/``) must open with a module docstring of at least
:data:`MIN_DOCSTRING_CHARS` characters and :data:`MIN_SENTENCES` sentences: its role on the
first line, then what it holds and who calls it. A one-line label ("Helpers.") does not pass.
No module may be longer than :data:`MAX_LINES` physical lines; most are 100-400.

Each file is a test case of its own, so that a failure names the file. Run by ``make test``
with the rest of ``tests/unit``; ``ARCHITECTURE.md`` lists it among the contracts.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("convergence", "workers", "simcloud/convergence_simcloud")

MAX_LINES = 500
MIN_DOCSTRING_CHARS = 150
MIN_SENTENCES = 2

# A sentence ends with ., ! or ? followed by white space or the end of the docstring.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def _modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


MODULES = _modules()


def _id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_modules_are_found() -> None:
    assert len(MODULES) > 50, "the module list is suspiciously short: is ROOT right?"


@pytest.mark.parametrize("path", MODULES, ids=_id)
def test_module_opens_with_a_docstring_saying_what_it_is(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    assert doc, f"{_id(path)} has no module docstring: say its role and who calls it"
    sentences = len(_SENTENCE_END.findall(doc))
    assert len(doc) >= MIN_DOCSTRING_CHARS and sentences >= MIN_SENTENCES, (
        f"{_id(path)}: the module docstring is too short ({len(doc)} characters, "
        f"{sentences} sentence(s)); say its role, what it holds and who calls it "
        f"(at least {MIN_DOCSTRING_CHARS} characters and {MIN_SENTENCES} sentences)")


@pytest.mark.parametrize("path", MODULES, ids=_id)
def test_module_is_not_over_the_size_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, (
        f"{_id(path)} has {lines} lines, over {MAX_LINES}: split it by concern")
