"""A desired state's id: the digest of its canonical JSON, computed a piece of text at a time.

``convergence.ports.views.template_id`` hashes the template's text in pieces so that a large
one is not copied to be hashed; the ids of contents stored before must not change. Here the id
is held to the digest of the whole canonical document, for texts that JSON escapes in every
way (quotes, backslashes, control characters, non-ASCII and astral characters, lone
surrogates), cut into pieces of every size.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from convergence.ports.views import TemplateContent, template_id


def whole(content: TemplateContent) -> str:
    body: dict[str, Any] = {
        "text": content.text, "files": dict(content.files),
        "environments": list(content.environments), "parameters": dict(content.parameters)}
    if content.scaling:
        body["scaling"] = dict(content.scaling)
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


TEXT = 'a: "quoted" \\ back\n\tb: \x01 é ✓ \U0001f600 \ud83d lone\n' * 5


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 1 << 20])
@pytest.mark.parametrize("content", [
    TemplateContent(text=""),
    TemplateContent(text=TEXT),
    TemplateContent(text=TEXT, files={"f.yaml": "x"}, environments=({"parameters": {}},),
                    parameters={"p": 1}, scaling={"capacity": {"g": 2}}),
])
def test_the_id_is_the_digest_of_the_whole_document(
        content: TemplateContent, piece: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("convergence.ports.views._HASHED_AT_ONCE", piece)
    assert template_id(content) == whole(content)


def test_a_known_id_stays_the_same() -> None:
    content = TemplateContent(text="heat_template_version: 2018-08-31\n")
    assert template_id(content) == hashlib.sha256(
        b'{"environments":[],"files":{},"parameters":{},'
        b'"text":"heat_template_version: 2018-08-31\\n"}').hexdigest()
