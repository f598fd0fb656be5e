"""Progress where output is not a terminal (logs, pipes, CI): a line when something changed,
at most one every couple of seconds (``progress.PLAIN_SECONDS``), and the last one at the
end; nothing repeated.

The view is told with a clock in hand; the command line with a real create whose resources
finish one after another for a few seconds, counting the lines it printed against how long
it ran (a bound on the count, not a timing).
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from convergence.cli import cli
from convergence.cli.progress import PlainView, Snapshot
from convergence.ports.views import StackView

INTERVAL = 2.0


class Ticks:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def stack(status: str = "IN_PROGRESS") -> StackView:
    return StackView(id="s-1", name="web", tenant="default", generation=1,
                     observed_generation=0 if status == "IN_PROGRESS" else 1,
                     traversal_id="t-1", template_id=None, rollback_template_id=None,
                     action="CREATE", status=status, status_reason="", outputs={},
                     timeout_mins=None, disable_rollback=False, created_at=0.0,
                     updated_at=0.0, deleted_at=None)


def snap(done: int, total: int = 10, status: str = "IN_PROGRESS") -> Snapshot:
    return Snapshot(stack(status), total, done, ())


@pytest.fixture
def view() -> Iterator[tuple[PlainView, Ticks, io.StringIO]]:
    sink = io.StringIO()
    ticks = Ticks()
    shown = PlainView(Console(file=sink, force_terminal=False, width=200), INTERVAL, ticks)
    yield shown, ticks, sink


def lines(sink: io.StringIO) -> list[str]:
    return sink.getvalue().splitlines()


def test_nothing_is_printed_again_while_nothing_changes(
        view: tuple[PlainView, Ticks, io.StringIO]) -> None:
    shown, ticks, sink = view
    for _ in range(50):
        shown.show(snap(3))
        ticks.now += 1.0
    shown.close()
    assert lines(sink) == ["web: CREATE_IN_PROGRESS  3/10 resources done"]


def test_changes_are_printed_at_most_once_per_interval_and_the_last_at_the_end(
        view: tuple[PlainView, Ticks, io.StringIO]) -> None:
    shown, ticks, sink = view
    for done in range(10):  # a change every 0.1 s for a second
        shown.show(snap(done))
        ticks.now += 0.1
    assert lines(sink) == ["web: CREATE_IN_PROGRESS  0/10 resources done"]
    ticks.now = 2.5
    shown.show(snap(9))  # the interval passed: the latest state
    shown.show(snap(10, status="COMPLETE"))  # finished right after: held back ...
    assert lines(sink)[-1] == "web: CREATE_IN_PROGRESS  9/10 resources done"
    shown.close()  # ... and printed at the end
    assert lines(sink) == ["web: CREATE_IN_PROGRESS  0/10 resources done",
                           "web: CREATE_IN_PROGRESS  9/10 resources done",
                           "web: CREATE_COMPLETE  10/10 resources done"]


def test_a_change_undone_before_it_was_printed_is_not_printed(
        view: tuple[PlainView, Ticks, io.StringIO]) -> None:
    shown, ticks, sink = view
    shown.show(snap(1))
    ticks.now = 0.5
    shown.show(snap(2))
    ticks.now = 0.6
    shown.show(snap(1))
    shown.close()
    assert lines(sink) == ["web: CREATE_IN_PROGRESS  1/10 resources done"]


# the command line -----------------------------------------------------------------------------

STAGGERED = 12  # resources finishing about every quarter of a second
AT_MOST_EVERY = 2.0  # seconds: plain progress lines come no closer than this


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'progress.db'}"
    monkeypatch.setenv("CONVERGENCE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CONVERGENCE_DATABASE_URL", url)
    monkeypatch.delenv("CONVERGENCE_BROKER_URL", raising=False)
    monkeypatch.delenv("CONVERGENCE_PROJECT_ID", raising=False)
    yield url
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == "convergence"]:
        root.removeHandler(handler)


def test_a_create_of_a_few_seconds_prints_a_few_lines(db_url: str, tmp_path: Path) -> None:
    resources = "".join(
        f"  r{i}:\n    type: OS::Heat::TestResource\n"
        f"    properties: {{wait_secs: {0.25 * (i + 1)}}}\n" for i in range(STAGGERED))
    template = tmp_path / "staggered.yaml"
    template.write_text("heat_template_version: 2018-08-31\nresources:\n" + resources)

    started = time.monotonic()
    result = CliRunner().invoke(cli, ["stack", "create", "staggered", "-t", str(template),
                                      "--wait"], catch_exceptions=False)
    took = time.monotonic() - started
    assert result.exit_code == 0, result.output
    printed = [line for line in result.output.splitlines() if line.startswith("staggered: ")]

    assert printed[-1] == f"staggered: CREATE_COMPLETE  {STAGGERED}/{STAGGERED} resources done"
    # One line per interval at most (the first at once), and the last one at the end.
    assert 1 <= len(printed) <= took / AT_MOST_EVERY + 2, printed
    assert all(a != b for a, b in pairwise(printed)), printed
