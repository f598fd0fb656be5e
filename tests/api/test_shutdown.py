"""SIGTERM stops a real ``convergence api`` process while clients hold it: an event stream and
a long-poll are open, and neither keeps the server waiting past its shutdown grace.

The process is started as an operator would (``python -m convergence api``, embedded store)
and its log is kept: it also shows the noauth warning given at start.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.api_process import api_process as started_api

GRACE = 2
MARGIN = 10  # generous: the process must exit, not merely exit fast


@contextmanager
def api_process(folder: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    with started_api(folder, env_updates={
            "CONVERGENCE_SHUTDOWN_GRACE_SECONDS": str(GRACE), "CONVERGENCE_AUTH": None,
            "CONVERGENCE_ALLOW_NOAUTH": None}) as (proc, url, log_path):
        try:
            yield proc, url, log_path
        finally:
            if proc.poll() is None:
                proc.kill()


class Held:
    """A request held open on a thread: what it received and how it ended."""

    def __init__(self, url: str, stream: bool) -> None:
        self.received: list[str] = []
        self.ended = threading.Event()
        self.opened = threading.Event()
        self.outcome = ""
        self._thread = threading.Thread(target=self._run, args=(url, stream), daemon=True)
        self._thread.start()

    def _run(self, url: str, stream: bool) -> None:
        try:
            with httpx.Client(timeout=httpx.Timeout(5, read=120)) as client:
                if stream:
                    with client.stream("GET", url) as r:
                        self.opened.set()
                        for chunk in r.iter_text():
                            self.received.append(chunk)
                else:
                    self.opened.set()
                    self.received.append(client.get(url).text)
            self.outcome = "ended"
        except httpx.HTTPError as exc:
            self.outcome = type(exc).__name__
        finally:
            self.ended.set()


def test_sigterm_stops_the_api_with_a_stream_and_a_long_poll_open(tmp_path: Path) -> None:
    with api_process(tmp_path) as (proc, url, log_path):
        r = httpx.post(f"{url}/v1/t/stacks", json={
            "stack_name": "s", "template": {"heat_template_version": "2018-08-31",
                                            "resources": {"a": {"type": "OS::Heat::None"}}}})
        assert r.status_code == 201, r.text
        stack = f"{url}/v1/t/stacks/s/{r.json()['stack']['id']}"
        held = [Held(f"{url}/v1/t/events?watch=true", stream=True),
                Held(f"{stack}/events?watch=true", stream=True),
                Held(f"{url}/v1/t/events?marker=1000000&wait=60", stream=False)]
        for h in held:
            assert h.opened.wait(10)
        deadline = time.monotonic() + 10
        while not all(h.received for h in held[:2]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(h.received for h in held[:2]), "the streams did not start"
        assert not any(h.ended.is_set() for h in held)

        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(GRACE + MARGIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"convergence api did not stop within {GRACE + MARGIN} s of SIGTERM "
                        "with clients connected:\n" + log_path.read_text())
        for h in held:
            assert h.ended.wait(10), "a request was left hanging"
        log = log_path.read_text()
    assert "Authentication is off (CONVERGENCE_AUTH=noauth)" in log
