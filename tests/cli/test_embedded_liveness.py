"""Two processes on one embedded database: what one drives, the others show as it is without
waiting for it; what one left behind (killed, or interrupted), the next command resumes.

The stories run ``convergence`` as real processes (``python -m convergence``, stderr a pipe,
not a terminal) on a SQLite file of their own. Nothing asserts on timing: a command that must
not wait for another process is shown to have returned while that process was still at work.
Who counts as live is told on one process, with a manual clock, in
``tests/engine/test_stack_holds.py``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from convergence.cli import cli
from convergence.errors import NotFound
from convergence.runtime import Runtime, open_runtime
from convergence.services import queries
from convergence.settings import Settings

ONE = """\
    heat_template_version: 2018-08-31
    resources:
      quick: {type: OS::Heat::TestResource}
      slow:
        type: OS::Heat::TestResource
        properties: {value: one}
    outputs:
      value: {value: {get_attr: [slow, output]}}
    """

# The update of ``slow`` takes this long: ample for the other commands to run meanwhile.
UPDATE_SECONDS = 12
TWO = ONE.replace("{value: one}", f"{{value: two, action_wait_secs: {{update: {UPDATE_SECONDS}}}}}")

SLOW_CREATE = """\
    heat_template_version: 2018-08-31
    resources:
      slow:
        type: OS::Heat::TestResource
        properties: {wait_secs: 3}
      after:
        type: OS::Heat::TestResource
        depends_on: [slow]
    """

PATIENCE = 120.0  # seconds a story waits for something before it fails


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of the commands: a database of the test's own, embedded, short leases
    (a killed process's work comes back within seconds)."""
    values = {k: v for k, v in os.environ.items() if not k.startswith("CONVERGENCE_")}
    values.update(CONVERGENCE_DATABASE_URL=f"sqlite:///{tmp_path / 'live.db'}",
                  CONVERGENCE_DATA_DIR=str(tmp_path / "data"),
                  CONVERGENCE_LEASE_SECONDS="2", CONVERGENCE_SWEEP_SECONDS="0.5")
    yield values
    root = logging.getLogger()  # what commands run here (``here``) configured
    for handler in [h for h in root.handlers if h.get_name() == "convergence"]:
        root.removeHandler(handler)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def convergence(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "convergence", *args], env=env,
                          capture_output=True, text=True, timeout=PATIENCE)


def here(env: dict[str, str], *args: str) -> Result:
    """A command run in this test's own process (another process than the one it watches)."""
    mine = {k: v for k, v in env.items() if k.startswith("CONVERGENCE_")}
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("CONVERGENCE_")}
    return CliRunner().invoke(cli, list(args), env={**unset, **mine}, catch_exceptions=False)


@pytest.fixture
def start(env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Starts a command in the background, its output to files (a pipe nobody reads could
    fill); whatever is still running when the test ends is killed."""
    started: list[subprocess.Popen[str]] = []

    def run(*args: str) -> subprocess.Popen[str]:
        with (tmp_path / "bg.out").open("w") as out, (tmp_path / "bg.err").open("w") as err:
            started.append(subprocess.Popen([sys.executable, "-m", "convergence", *args],
                                            env=env, stdout=out, stderr=err, text=True))
        return started[-1]

    yield run
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.fixture
def look(env: dict[str, str]) -> Iterator[Callable[[str], tuple[str, dict[str, str]]]]:
    """Reads a stack straight from the database (no command, so nothing is resumed): its
    status and each resource's action_status. The database is made first, by a command."""
    assert convergence(env, "stack", "list").returncode == 0
    rt: Runtime | None = None

    def read(name: str) -> tuple[str, dict[str, str]]:
        nonlocal rt
        if rt is None:
            rt = open_runtime(Settings(database_url=env["CONVERGENCE_DATABASE_URL"]),
                              migrate=False)
        try:
            stack = queries.get_stack(rt, "default", name)
        except NotFound:  # not accepted yet
            return "", {}
        records = queries.list_resources(rt, "default", stack.id)
        return stack.stack_status, {r.name: f"{r.action}_{r.status}" for r in records}

    yield read
    if rt is not None:
        rt.store.engine.dispose()


def until(what: Callable[[], bool], story: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not what():
        assert time.monotonic() < deadline, f"never happened: {story}"
        time.sleep(0.1)


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# a live process's work is shown, not resumed -------------------------------------------------

def test_commands_show_a_stack_another_live_process_is_updating_without_waiting_for_it(
        env: dict[str, str], tmp_path: Path, start: Callable[..., subprocess.Popen[str]],
        look: Callable[[str], tuple[str, dict[str, str]]]) -> None:
    # Leases (and holds) of the default length: however busy the machine, the updater's hold
    # is renewed long before it could run out.
    env["CONVERGENCE_LEASE_SECONDS"] = "30"
    one, two = write(tmp_path, "one.yaml", ONE), write(tmp_path, "two.yaml", TWO)
    assert convergence(env, "stack", "create", "slow", "-t", str(one)).returncode == 0
    updater = start("stack", "update", "slow", "-t", str(two))
    until(lambda: look("slow")[1].get("slow") == "UPDATE_IN_PROGRESS",
          "the updater works on the slow resource")

    # Another terminal, and this test's own process: none of them may resume the update.
    shown = convergence(env, "stack", "show", "slow", "-f", "json")
    looked = {k: here(env, *args) for k, args in {
        "list": ["stack", "list", "-f", "json"],
        "events": ["event", "list", "slow", "-f", "json"],
        "resources": ["resource", "list", "slow", "-f", "json"],
        "resource": ["resource", "show", "slow", "slow", "-f", "json"],
        "outputs": ["output", "list", "slow", "-f", "json"],
    }.items()}
    updating, now = updater.poll() is None, look("slow")[0]

    assert shown.returncode == 0, shown.stderr
    assert "Resuming" not in shown.stderr, shown.stderr
    assert "resources done" not in shown.stderr  # no progress: nothing runs there
    for k, result in looked.items():
        assert result.exit_code == 0, (k, result.output)
        assert "Resuming" not in result.stderr, (k, result.stderr)
        assert "resources done" not in result.stderr, k
    # They are back, and the updater is still at it: none of them waited for its work.
    assert updating
    assert now == "UPDATE_IN_PROGRESS"
    assert json.loads(shown.stdout)["stack_status"] == "UPDATE_IN_PROGRESS"
    listed = {s["stack_name"]: s for s in json.loads(looked["list"].stdout)}
    assert listed["slow"]["stack_status"] == "UPDATE_IN_PROGRESS"
    events = json.loads(looked["events"].stdout)
    assert ("slow", "UPDATE_IN_PROGRESS") in {(e["resource_name"], e["resource_status"])
                                              for e in events}
    assert "UPDATE_COMPLETE" not in {e["resource_status"] for e in events}
    resources = {r["resource_name"]: r for r in json.loads(looked["resources"].stdout)}
    assert resources["slow"]["resource_status"] == "UPDATE_IN_PROGRESS"
    assert json.loads(looked["resource"].stdout)["resource_status"] == "UPDATE_IN_PROGRESS"
    assert [o["output_key"] for o in json.loads(looked["outputs"].stdout)] == ["value"]

    # The update goes on in its own process, to the end.
    assert updater.wait(timeout=PATIENCE) == 0, (tmp_path / "bg.err").read_text()
    assert "UPDATE_COMPLETE" in (tmp_path / "bg.out").read_text()
    shown = _json(convergence(env, "stack", "show", "slow", "-f", "json"))
    assert shown["stack_status"] == "UPDATE_COMPLETE"
    assert [o["output_value"] for o in shown["outputs"]] == ["two"]


# abandoned work is resumed, with its progress -------------------------------------------------

def _resumed_by_the_next_show(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``stack show`` until one resumes the stack's work; those before it showed the stack in
    progress, at once (its process's hold had not run out yet)."""
    deadline = time.monotonic() + PATIENCE
    while True:
        shown = convergence(env, "stack", "show", "k", "-f", "json")
        assert shown.returncode == 0, shown.stderr
        if "Resuming" in shown.stderr:
            return shown
        assert json.loads(shown.stdout)["stack_status"] == "CREATE_IN_PROGRESS"
        assert time.monotonic() < deadline, "the abandoned create was never resumed"


def test_the_work_of_a_killed_process_is_resumed_by_the_next_command_with_progress(
        env: dict[str, str], tmp_path: Path, start: Callable[..., subprocess.Popen[str]],
        look: Callable[[str], tuple[str, dict[str, str]]]) -> None:
    t = write(tmp_path, "k.yaml", SLOW_CREATE)
    creator = start("stack", "create", "k", "-t", str(t))
    until(lambda: look("k")[1].get("slow") == "CREATE_IN_PROGRESS",
          "the creator works on the slow resource")
    creator.send_signal(signal.SIGKILL)  # no goodbye: its hold and leases simply run out
    assert creator.wait(timeout=PATIENCE) == -signal.SIGKILL
    assert look("k")[0] == "CREATE_IN_PROGRESS"

    shown = _resumed_by_the_next_show(env)
    assert "Resuming the interrupted CREATE of stack k ..." in shown.stderr
    # Progress on stderr although it is a pipe, ending with the outcome.
    progress = [line for line in shown.stderr.splitlines() if line.startswith("k: ")]
    assert progress, shown.stderr
    assert progress[-1] == "k: CREATE_COMPLETE  2/2 resources done"
    assert json.loads(shown.stdout)["stack_status"] == "CREATE_COMPLETE"
    assert look("k") == ("CREATE_COMPLETE",
                         {"slow": "CREATE_COMPLETE", "after": "CREATE_COMPLETE"})


def test_an_interrupted_process_lets_go_at_once(
        env: dict[str, str], tmp_path: Path, start: Callable[..., subprocess.Popen[str]],
        look: Callable[[str], tuple[str, dict[str, str]]]) -> None:
    t = write(tmp_path, "k.yaml", SLOW_CREATE)
    creator = start("stack", "create", "k", "-t", str(t))
    until(lambda: look("k")[1].get("slow") == "CREATE_IN_PROGRESS",
          "the creator works on the slow resource")
    creator.send_signal(signal.SIGINT)  # Ctrl-C
    assert creator.wait(timeout=PATIENCE) == 130
    assert "the next command that touches it resumes it" in (tmp_path / "bg.err").read_text()

    shown = convergence(env, "stack", "show", "k", "-f", "json")  # the very next one
    assert "Resuming the interrupted CREATE of stack k ..." in shown.stderr
    assert _json(shown)["stack_status"] == "CREATE_COMPLETE"
