"""``/docs`` works with no other host reachable: every script, style sheet and icon the page
references is served by the app itself."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.runtime import open_runtime
from convergence.settings import Settings

CONTENT_TYPES = {".js": "javascript", ".css": "text/css", ".png": "image/png",
                 ".ico": "image/", ".svg": "image/svg"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    rt = open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'docs.db'}"))
    with TestClient(create_app(rt, drive_dispatcher=False)) as c:
        yield c


def referenced(html: str) -> list[str]:
    """The URLs a page loads: script sources, links (style sheets, icons) and the OpenAPI
    document Swagger UI reads."""
    found = re.findall(r"<(?:script|link|img)\b[^>]*?\b(?:src|href)=[\"']([^\"']+)", html)
    found += re.findall(r"\burl:\s*'([^']+)'", html)
    return found


def test_docs_load_everything_from_the_app(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    urls = referenced(page.text)
    assert any(u.endswith(".js") for u in urls) and any(u.endswith(".css") for u in urls)
    assert "/openapi.json" in urls
    for url in urls:
        absolute = urljoin("http://testserver/docs", url)
        assert urlsplit(absolute).netloc == "testserver", f"/docs loads {url} from elsewhere"
        r = client.get(absolute)
        assert r.status_code == 200, url
        assert r.content, url
        suffix = Path(urlsplit(absolute).path).suffix
        if suffix in CONTENT_TYPES:
            assert CONTENT_TYPES[suffix] in r.headers["content-type"], url
        elif url == "/openapi.json":
            assert r.json()["info"]["title"] == "Convergence orchestration API"


def test_docs_name_no_other_host(client: TestClient) -> None:
    html = client.get("/docs").text
    assert not re.findall(r"(?:src|href)=[\"'](?:https?:)?//", html)
    assert "cdn." not in html
