"""What ``--wait`` prints as a request runs: done/total from the traversal's counters, failures
counted, a few of the resources in progress; on the embedded default and through a real API
process (the watch stream's ``stack.progress`` messages).

Each test runs the real command line (click's CliRunner) on a real stack and asserts on the
progress lines it printed; nothing asserts on timing. Counts are the traversal's nodes: one per
resource the request works on, one more per replaced version it deletes.
"""

from __future__ import annotations

import io
import logging
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result
from rich.console import Console

from convergence.cli import cli, progress
from convergence.cli.remote import RemoteClient
from tests.api_process import running_api

FAILING = """\
    heat_template_version: 2018-08-31
    resources:
      good:
        type: OS::Heat::TestResource
      bad:
        type: OS::Heat::TestResource
        depends_on: [good]
        properties: {fail: true}
      after:
        type: OS::Heat::TestResource
        depends_on: [bad]
    """

# Five resources at once, each a while in progress (their waits are polls: none holds a thread).
PARALLEL = "heat_template_version: 2018-08-31\nresources:\n" + "".join(
    f"  r{i}:\n    type: OS::Heat::TestResource\n    properties: {{wait_secs: 1}}\n"
    for i in range(5))


def nones(values: dict[str, str]) -> str:
    return "heat_template_version: 2018-08-31\nresources:\n" + "".join(
        f"  {name}:\n    type: OS::Heat::None\n    properties: {{value: {value}}}\n"
        for name, value in values.items())


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def lines_of(result: Result, stack: str) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith(f"{stack}: ")]


@pytest.fixture(autouse=True)
def no_log_handlers() -> Iterator[None]:
    yield
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == "convergence"]:
        root.removeHandler(handler)


@pytest.fixture
def every_change(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "REFRESH_SECONDS", 0.0)  # look at every step
    monkeypatch.setattr(progress, "PLAIN_SECONDS", 0.0)  # and print every change


@pytest.fixture
def embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("CONVERGENCE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.delenv("CONVERGENCE_BROKER_URL", raising=False)
    monkeypatch.delenv("CONVERGENCE_PROJECT_ID", raising=False)
    monkeypatch.delenv("CONVERGENCE_URL", raising=False)
    return []


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_api(tmp_path_factory.mktemp("progress")) as url:
        yield url


@pytest.fixture
def remote(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The CLI pointed at the API process (a tenant per test); embedded mode would fail."""
    monkeypatch.setenv("CONVERGENCE_PROJECT_ID", tmp_path.name)
    monkeypatch.delenv("CONVERGENCE_URL", raising=False)
    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", "sqlite:////nonexistent/dir/never.db")
    return ["--url", server]


@pytest.fixture(params=["embedded", "remote"])
def mode(request: pytest.FixtureRequest) -> list[str]:
    found: list[str] = request.getfixturevalue(request.param)
    return found


def run(mode: list[str], *args: str) -> Result:
    return CliRunner().invoke(cli, [*mode, *args], catch_exceptions=False)


def test_create_update_and_delete_count_the_work_of_each_request(
        mode: list[str], tmp_path: Path) -> None:
    first = write(tmp_path, "a.yaml", nones({"a": "1", "b": "1", "c": "1"}))
    created = run(mode, "stack", "create", "n", "-t", str(first), "--wait")
    assert created.exit_code == 0, created.output
    assert lines_of(created, "n")[-1] == "n: CREATE_COMPLETE  3/3 resources done"

    # One resource changed: a no-op resource is replaced, so the update's work is making the
    # new version and deleting the old one; the two left alone are no work of it.
    second = write(tmp_path, "b.yaml", nones({"a": "1", "b": "2", "c": "1"}))
    updated = run(mode, "stack", "update", "n", "-t", str(second), "--wait")
    assert updated.exit_code == 0, updated.output
    assert lines_of(updated, "n")[-1] == "n: UPDATE_COMPLETE  2/2 resources done"

    deleted = run(mode, "stack", "delete", "n", "--yes", "--wait")
    assert deleted.exit_code == 0, deleted.output
    assert lines_of(deleted, "n")[-1] == "n: DELETE_COMPLETE  3/3 resources done"


def test_a_failure_is_counted_and_what_it_left_undone_too(mode: list[str],
                                                          tmp_path: Path) -> None:
    t = write(tmp_path, "failing.yaml", FAILING)
    result = run(mode, "stack", "create", "f", "-t", str(t), "--disable-rollback", "--wait")
    assert result.exit_code == 1, result.output
    # good done, bad failed, after skipped (counted off as finished: it will not run).
    assert lines_of(result, "f")[-1] == "f: CREATE_FAILED  2/3 resources done, 1 failed"


def test_resources_in_progress_are_named_a_few_at_a_time(mode: list[str], tmp_path: Path,
                                                         every_change: None) -> None:
    t = write(tmp_path, "parallel.yaml", PARALLEL)
    result = run(mode, "stack", "create", "p", "-t", str(t), "--wait")
    assert result.exit_code == 0, result.output
    printed = lines_of(result, "p")
    busy = [line.split("; in progress: ", 1)[1] for line in printed if "in progress:" in line]
    # Never more than three names; the rest counted (remote: the stream's events tell how
    # many) or only said to be there (embedded: a bounded read cannot count them).
    assert busy, printed
    assert all(len(b.split(" (+")[0].split(", ")) <= 3 for b in busy), busy
    assert any(b.endswith((" (+more)", " (+2 more)")) for b in busy), busy
    assert printed[-1] == "p: CREATE_COMPLETE  5/5 resources done"


class WithoutProgress(httpx.BaseTransport):
    """A server without the progress stream (an older API): its routes 404, the rest is the
    real API's."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/progress"):
            return httpx.Response(404, json={"error": {"message": "Not Found"}})
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def test_without_the_progress_stream_the_events_are_counted(server: str,
                                                            tmp_path: Path) -> None:
    client = RemoteClient(server, tmp_path.name, transport=WithoutProgress())
    sink = io.StringIO()
    view = progress.PlainView(Console(file=sink, force_terminal=False, width=200))
    try:
        request = client.create_stack(
            "old", textwrap.dedent(FAILING), files={}, environments=(), parameters={},
            timeout_mins=None, disable_rollback=True)
        ended = client.follow(request, view)
    finally:
        client.close()
    assert ended.stack_status == "CREATE_FAILED"
    # Counted from the events: the resources seen, those whose last event is a completion
    # (the skipped one was never seen; no failure count without the counters).
    assert sink.getvalue().splitlines()[-1] == "old: CREATE_FAILED  1/2 resources done"
