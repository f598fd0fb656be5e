"""Every real-world template validates, or fails only with honest errors.

Honest: a resource type the project does not implement yet, or a file that is not in the
template's folder. Anything else is a parser defect (or an error Heat would not give).
"""

from __future__ import annotations

import os

import pytest

from .corpus import ROOT, SOURCES, corpus_available, missing_message, validate_source

pytestmark = pytest.mark.corpus


@pytest.fixture(scope="module", autouse=True)
def _corpus_present() -> None:
    if not corpus_available():
        if os.environ.get("CI"):
            pytest.fail(missing_message())
        pytest.skip(missing_message())


@pytest.mark.parametrize("source", SOURCES)
def test_every_template_validates_or_fails_honestly(source: str) -> None:
    outcomes = validate_source(ROOT / source)
    assert outcomes, f"no templates found in {source}"
    dishonest = {o.path: o.problems for o in outcomes if not o.honest}
    assert dishonest == {}


def test_some_templates_validate_fully() -> None:
    outcomes = [o for s in SOURCES for o in validate_source(ROOT / s)]
    assert any(o.valid for o in outcomes)
