"""noauth, said loudly: a warning logged when the API starts and shown by ``/healthz``, and
``convergence api`` refusing to serve it beyond loopback unless told to.

The command-line checks run ``convergence api`` through click's CliRunner with uvicorn's
serving replaced: nothing listens, the test sees where the server would have listened.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import uvicorn
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from convergence.api.app import create_app
from convergence.cli import cli
from convergence.runtime import Runtime, open_runtime
from convergence.settings import Settings

NOAUTH = "Authentication is off (CONVERGENCE_AUTH=noauth)"


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    yield open_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'noauth.db'}"))


def test_healthz_says_noauth(rt: Runtime) -> None:
    with TestClient(create_app(rt, drive_dispatcher=False)) as client:
        for path in ("/healthz", "/healthcheck"):
            body = client.get(path).json()
            assert body["status"] == "ok"
            assert body["auth"] == "noauth"
            assert [w for w in body["warnings"] if NOAUTH in w]


def test_healthz_says_nothing_more_with_tokens(rt: Runtime, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("secret: {project: tenantA}\n")
    rt.settings = rt.settings.with_(auth="token", tokens_file=str(tokens))
    with TestClient(create_app(rt, drive_dispatcher=False)) as client:
        assert client.get("/healthz").json() == {"status": "ok"}


def test_the_start_logs_a_warning(rt: Runtime) -> None:
    with structlog.testing.capture_logs() as logs, \
            TestClient(create_app(rt, drive_dispatcher=False)):
        pass
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1
    assert NOAUTH in warnings[0]["event"]
    assert warnings[0]["auth_mode"] == "noauth"


# convergence api -----------------------------------------------------------------------------

@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The hosts ``convergence api`` would have listened on (nothing listens)."""
    hosts: list[str] = []
    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", f"sqlite:///{tmp_path / 'api.db'}")
    monkeypatch.setenv("CONVERGENCE_DATA_DIR", str(tmp_path / "data"))
    for name in ("CONVERGENCE_AUTH", "CONVERGENCE_ALLOW_NOAUTH", "CONVERGENCE_BROKER_URL",
                 "CONVERGENCE_TOKENS_FILE"):
        monkeypatch.delenv(name, raising=False)

    def run(app: Any, **kwargs: Any) -> None:
        hosts.append(kwargs["host"])

    def serve(self: uvicorn.Server, *_: Any, **__: Any) -> None:
        hosts.append(self.config.host)
        self.started = True

    monkeypatch.setattr(uvicorn, "run", run)
    monkeypatch.setattr(uvicorn.Server, "run", serve)
    yield hosts
    root = logging.getLogger()  # the command configured logging for this process
    for handler in [h for h in root.handlers if h.get_name() == "convergence"]:
        root.removeHandler(handler)


def api(*args: str) -> Result:
    return CliRunner().invoke(cli, ["api", *args])


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.org"])
def test_noauth_beyond_loopback_is_refused(served: list[str], host: str) -> None:
    result = api("--host", host)
    assert result.exit_code == 2, result.output
    assert f"refusing to listen on {host} without authentication" in result.output
    assert "--allow-noauth" in result.output
    assert served == []


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "localhost", "LOCALHOST"])
def test_noauth_on_loopback_is_served(served: list[str], host: str) -> None:
    result = api("--host", host)
    assert result.exit_code == 0, result.output
    assert served == [host]


def test_noauth_beyond_loopback_when_told_so(served: list[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    assert api("--host", "0.0.0.0", "--allow-noauth").exit_code == 0
    monkeypatch.setenv("CONVERGENCE_ALLOW_NOAUTH", "true")
    assert api("--host", "0.0.0.0").exit_code == 0
    assert served == ["0.0.0.0", "0.0.0.0"]
    monkeypatch.setenv("CONVERGENCE_ALLOW_NOAUTH", "maybe")
    result = api("--host", "0.0.0.0")
    assert result.exit_code == 2
    assert "CONVERGENCE_ALLOW_NOAUTH must be true or false" in result.output


def test_tokens_may_be_served_anywhere(served: list[str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("secret: {project: tenantA}\n")
    monkeypatch.setenv("CONVERGENCE_AUTH", "token")
    monkeypatch.setenv("CONVERGENCE_TOKENS_FILE", str(tokens))
    assert api("--host", "0.0.0.0").exit_code == 0
    assert served == ["0.0.0.0"]
